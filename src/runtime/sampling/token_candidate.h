// TokenCandidate and the selection steps of sampling over a span of them: top-k on logits,
// logits → unnormalised probabilities, and lazily sorted walks in rank order (no full sort).
#pragma once

#include <cstdint>
#include <span>

namespace beam {

// One vocabulary entry in a sampler's scratch row. `value` is first a processed logit, then
// (after to_weights) an unnormalised probability exp((logit - max) / T) in (0, 1].
struct TokenCandidate {
  float value;
  int32_t id;
};

// The one order every selection uses: larger value first, equal values → lower token id.
inline bool ranks_before(const TokenCandidate& a, const TokenCandidate& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

// Moves the k candidates that rank first to the front (unordered); returns min(k, size).
int64_t keep_top_k(std::span<TokenCandidate> candidates, int64_t k);

// Replaces each logit by exp((logit - max) / temperature) (temperature > 0) and moves the
// entries with a non-zero weight to the front, keeping their order. The candidate with the
// largest logit gets weight exactly 1, so min-p compares weights against min_p directly.
struct WeightedCandidates {
  int64_t size = 0;           // entries with weight > 0, now at the front
  double total_weight = 0.0;  // their sum, accumulated in storage order
};
WeightedCandidates to_weights(std::span<TokenCandidate> candidates, double temperature);

// How far a walk in rank order went: `count` first-ranked candidates now sorted at the front,
// whose weights sum (in that order) to `mass`.
struct RankedPrefix {
  int64_t count = 0;
  double mass = 0.0;
};

enum class MassBound {
  kAtLeast,  // stop at the first prefix whose mass >= target (top-p)
  kAbove,    // stop at the first prefix whose mass > target (inverse-CDF draw)
};

// Walks the candidates in rank order, summing weights, until the bound on `target` holds; the
// first `sorted_prefix` entries must already be in rank order. Only as much is sorted as the
// walk reaches (nth_element + sort of blocks growing 4x from 64), so a peaked distribution costs
// O(size). Returns the whole span (sorted) when the target is never reached.
RankedPrefix walk_ranked(std::span<TokenCandidate> candidates, int64_t sorted_prefix,
                         double target, MassBound bound);

}  // namespace beam
