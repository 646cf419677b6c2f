// propose_ngram_drafts: a backward scan for the most recent, longest recurrence of the suffix.
#include "runtime/speculative/ngram_proposer.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace beam {

Status NgramSpeculation::validate() const {
  if (num_draft_tokens < 0 || num_draft_tokens > kMaxDraftTokens)
    return make_error("speculative num_draft_tokens " + std::to_string(num_draft_tokens) +
                      " is outside [0, " + std::to_string(kMaxDraftTokens) + "]");
  if (min_match < 1 || max_match < min_match || max_match > 64)
    return make_error("speculative n-gram lengths: need 1 <= min (" + std::to_string(min_match) +
                      ") <= max (" + std::to_string(max_match) + ") <= 64");
  if (max_batch < 0)
    return make_error("speculative max_batch " + std::to_string(max_batch) + " is negative");
  return ok_status();
}

int64_t propose_ngram_drafts(std::span<const int32_t> tokens, const NgramSpeculation& config,
                             std::span<int32_t> out) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (out.empty() || len <= config.min_match) return 0;
  const int32_t* t = tokens.data();
  const int32_t last = t[len - 1];
  int64_t best_len = 0, best_end = 0;  // the match t[best_end - best_len, best_end)
  // Candidate occurrences end at e (exclusive), e < len: the suffix itself is not one. Blocks of
  // kBlock candidates without the last token are skipped at once (the compare vectorizes).
  constexpr int64_t kBlock = 32;
  for (int64_t e = len - 1; e >= config.min_match; --e) {
    while (e - kBlock >= config.min_match) {
      const int32_t* block = t + e - kBlock;  // candidates e - kBlock + 1 .. e end here
      int hits = 0;
      for (int64_t k = 0; k < kBlock; ++k) hits += block[k] == last;
      if (hits > 0) break;
      e -= kBlock;
    }
    if (t[e - 1] != last) continue;
    const int64_t most = std::min(config.max_match, e);
    int64_t m = 1;
    while (m < most && t[e - 1 - m] == t[len - 1 - m]) ++m;
    if (m >= config.min_match && m > best_len) {
      best_len = m;
      best_end = e;
      if (m == config.max_match) break;
    }
  }
  if (best_len == 0) return 0;
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(out.size()), len - best_end);
  std::copy_n(t + best_end, n, out.begin());
  return n;
}

int64_t draft_cooldown_steps(int64_t misses) {
  return misses <= 0 ? 0 : int64_t{1} << std::min<int64_t>(misses, 5);
}

int64_t next_draft_limit(int64_t current, int64_t fed, int64_t accepted, int64_t max_drafts) {
  const int64_t next = accepted == fed ? current + 2 : current - 1;
  return std::clamp<int64_t>(next, 1, max_drafts);
}

int64_t count_accepted_drafts(std::span<const int32_t> drafts, std::span<const int32_t> sampled) {
  BEAM_CHECK_EQ(sampled.size(), drafts.size() + 1) << "one sampled token per draft plus the bonus";
  int64_t a = 0;
  while (a < static_cast<int64_t>(drafts.size()) && drafts[a] == sampled[a]) ++a;
  return a;
}

}  // namespace beam
