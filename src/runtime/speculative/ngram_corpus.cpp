// NgramCorpus: a ring of tokens and, per n-gram length, a lossy hash table of where each n-gram
// last ended; lookups verify the tokens, so collisions and evicted positions are misses.
#include "runtime/speculative/ngram_corpus.h"

#include <bit>

#include "core/check.h"

namespace beam {
namespace {

template <typename T>
T* zeroed(int64_t count) {
  void* p = std::calloc(static_cast<size_t>(count), sizeof(T));
  BEAM_CHECK(p != nullptr) << "NgramCorpus: out of host memory for " << count << " entries";
  return static_cast<T*>(p);
}

}  // namespace

NgramCorpus::NgramCorpus(int64_t capacity, const Speculation& config)
    : capacity_(capacity), min_match_(config.min_match), max_match_(config.max_match) {
  BEAM_CHECK(capacity >= 1 && config.min_match >= 1 && config.max_match >= config.min_match)
      << "NgramCorpus: capacity " << capacity << ", n-grams " << config.min_match << ".."
      << config.max_match;
  const int64_t lengths = max_match_ - min_match_ + 1;
  const uint64_t per_length =
      std::min(std::bit_ceil(static_cast<uint64_t>(2 * capacity)),
               std::bit_floor(static_cast<uint64_t>(std::max<int64_t>(kMaxSlots / lengths, 1))));
  slots_per_length_mask_ = per_length - 1;
  ring_.reset(zeroed<int32_t>(capacity));
  table_.reset(zeroed<uint64_t>(static_cast<int64_t>(per_length) * lengths));
  recent_.reserve(static_cast<size_t>(max_match_));
}

uint64_t NgramCorpus::slot(const int32_t* gram, int64_t n) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(n);
  for (int64_t i = 0; i < n; ++i) {
    h ^= static_cast<uint32_t>(gram[i]);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return static_cast<uint64_t>(n - min_match_) * (slots_per_length_mask_ + 1) +
         (h & slots_per_length_mask_);
}

void NgramCorpus::push(int32_t token) {
  if (token == kSeparator) {
    recent_.clear();
  } else {
    // The n-grams ending just before this token now have a token after them: each length's
    // table points at this position (the n-grams' end, exclusive).
    const auto num_recent = static_cast<int64_t>(recent_.size());
    const int64_t longest = std::min({num_recent, max_match_, capacity_ - 1});
    for (int64_t n = min_match_; n <= longest; ++n)
      table_[slot(recent_.data() + num_recent - n, n)] = end_;
    if (num_recent == max_match_) recent_.erase(recent_.begin());
    recent_.push_back(token);
  }
  ring_[end_ % static_cast<uint64_t>(capacity_)] = token;
  ++end_;
}

void NgramCorpus::add(std::span<const int32_t> tokens) {
  if (tokens.size() > static_cast<size_t>(capacity_ - 1))
    tokens = tokens.last(static_cast<size_t>(capacity_ - 1));
  for (int32_t t : tokens) {
    BEAM_CHECK(t >= 0) << "NgramCorpus: token id " << t;
    push(t);
  }
  push(kSeparator);
}

int64_t NgramCorpus::propose(std::span<const int32_t> tokens, std::span<int32_t> out,
                             int64_t longer_than) const {
  const auto len = static_cast<int64_t>(tokens.size());
  const uint64_t first = end_ > static_cast<uint64_t>(capacity_) ? end_ - capacity_ : 0;
  for (int64_t n = std::min(max_match_, len); n >= std::max(min_match_, longer_than + 1); --n) {
    const int32_t* gram = tokens.data() + len - n;
    // The occurrence's end (exclusive: the token after it); 0 for none.
    const uint64_t e = table_[slot(gram, n)];
    if (e == 0 || e >= end_ || e < first + static_cast<uint64_t>(n)) continue;
    bool same = true;
    for (int64_t i = 0; i < n && same; ++i) same = at(e - n + i) == gram[i];
    if (!same) continue;  // a collision overwrote it
    int64_t count = 0;
    for (uint64_t p = e; p < end_ && count < static_cast<int64_t>(out.size()); ++p) {
      const int32_t t = at(p);
      if (t == kSeparator) break;
      out[static_cast<size_t>(count++)] = t;
    }
    return count;
  }
  return 0;
}

}  // namespace beam
