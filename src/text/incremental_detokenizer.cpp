// IncrementalDetokenizer (see incremental_detokenizer.h).
#include "text/incremental_detokenizer.h"

#include "text/tokenization_cleanup.h"

namespace beam::text {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer),
      skip_special_(skip_special),
      cleanup_(tokenizer.clean_up_tokenization_spaces()) {}

Expected<std::string> IncrementalDetokenizer::step(std::span<const TokenId> ids) {
  for (TokenId id : ids) {
    if (!tokenizer_.piece(id)) return make_error("detokenize: token id " + std::to_string(id) + " has no token");
  }
  for (TokenId id : ids) {
    const TokenPiece* p = tokenizer_.piece(id);
    if (p->special && skip_special_) continue;
    if (p->added) {
      // Decode flushes before an added token, so a held partial character ends here.
      decoder_.flush(pending_);
      pending_ += p->bytes;
    } else {
      decoder_.feed(p->bytes, pending_);
    }
  }
  return release(/*final=*/false);
}

std::string IncrementalDetokenizer::finish() {
  decoder_.flush(pending_);
  return release(/*final=*/true);
}

std::string IncrementalDetokenizer::release(bool final) {
  if (!cleanup_) return std::exchange(pending_, std::string());
  // Cut at the largest k whose preceding kCleanupReach - 1 bytes hold no space: no replaced
  // pattern can straddle such a cut, so cleaning the two sides separately changes nothing.
  size_t cut = pending_.size();
  if (!final) {
    const std::string context = emitted_tail_ + pending_;
    const size_t offset = emitted_tail_.size();
    size_t k = context.size();
    while (k > offset) {
      const size_t from = k >= kCleanupReach - 1 ? k - (kCleanupReach - 1) : 0;
      if (context.find(' ', from) >= k && (static_cast<uint8_t>(context[k]) & 0xC0) != 0x80) break;
      --k;
    }
    cut = k - offset;
  }
  if (cut == 0) return {};
  std::string released = pending_.substr(0, cut);
  pending_.erase(0, cut);
  emitted_tail_ += released;
  if (emitted_tail_.size() > kCleanupReach) emitted_tail_.erase(0, emitted_tail_.size() - kCleanupReach);
  return clean_up_tokenization(released);
}

}  // namespace beam::text
