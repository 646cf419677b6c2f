// propose_ngram_drafts: a backward scan for the most recent, longest recurrence of the suffix.
#include "runtime/speculative/ngram_proposer.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace beam {

NgramMatch find_ngram_match(std::span<const int32_t> tokens, std::span<const int32_t> source,
                            const Speculation& config) {
  const auto len = static_cast<int64_t>(tokens.size());
  const auto src_len = static_cast<int64_t>(source.size());
  if (len < config.min_match) return NgramMatch{};  // min_match >= 1: also no tokens
  const int32_t* t = tokens.data();
  const int32_t* src = source.data();
  const int32_t last = t[len - 1];
  const int64_t longest = std::min(config.max_match, len);
  NgramMatch best;
  // Candidate occurrences end at e (exclusive) with a token after them, e < src_len (in the
  // sequence itself, the suffix is not one). Blocks of kBlock candidates without the last token
  // are skipped at once (the compare vectorizes).
  constexpr int64_t kBlock = 32;
  for (int64_t e = src_len - 1; e >= config.min_match; --e) {
    while (e - kBlock >= config.min_match) {
      const int32_t* block = src + e - kBlock;  // candidates e - kBlock + 1 .. e end here
      int hits = 0;
      for (int64_t k = 0; k < kBlock; ++k) hits += block[k] == last;
      if (hits > 0) break;
      e -= kBlock;
    }
    if (src[e - 1] != last) continue;
    const int64_t most = std::min(longest, e);
    int64_t m = 1;
    while (m < most && src[e - 1 - m] == t[len - 1 - m]) ++m;
    if (m >= config.min_match && m > best.length) {
      best = NgramMatch{m, e};
      if (m == longest) break;
    }
  }
  return best;
}

int64_t copy_ngram_drafts(std::span<const int32_t> source, const NgramMatch& match,
                          std::span<int32_t> out) {
  if (match.length == 0) return 0;
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(out.size()),
                                      static_cast<int64_t>(source.size()) - match.end);
  std::copy_n(source.begin() + match.end, n, out.begin());
  return n;
}

int64_t propose_ngram_drafts(std::span<const int32_t> tokens, const Speculation& config,
                             std::span<int32_t> out) {
  if (out.empty()) return 0;
  return copy_ngram_drafts(tokens, find_ngram_match(tokens, tokens, config), out);
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
