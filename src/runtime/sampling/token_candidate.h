// TokenCandidate and the selection steps of sampling over a span of them: top-k on logits,
// logits → unnormalised probabilities, and selection by probability mass in rank order — all
// expected O(size), never a full sort of the vocabulary.
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

// Replaces each logit by its weight exp((logit - max) / temperature) (temperature > 0) and
// returns the sum of the weights. The best candidate gets weight exactly 1, so min-p compares
// weights against min_p directly. Weights below 2^-126 are 0 (a probability ratio to the best
// under 1e-38); zero-weight candidates stay in the span but are never selected or drawn.
double to_weights(std::span<TokenCandidate> candidates, double temperature);

// The first `count` candidates in rank order, moved to the front (in no particular order) and
// the sum of their weights.
struct RankedPrefix {
  int64_t count = 0;
  double mass = 0.0;
};

enum class MassBound {
  kAtLeast,  // the shortest rank-order prefix whose mass >= target (top-p)
  kAbove,    // the shortest rank-order prefix whose mass > target (inverse-CDF draw)
};

// Finds the shortest prefix in rank order whose weight sum satisfies the bound on `target` by
// weighted quickselect (partition around a pivot, keep the side holding the crossing point);
// expected O(size). candidates[count - 1] is the last token of the prefix (the crossing token),
// which always has a non-zero weight. When rounding keeps the target out of reach, the crossing
// token is the last-ranked one with a non-zero weight.
RankedPrefix select_by_mass(std::span<TokenCandidate> candidates, double target, MassBound bound);

}  // namespace beam
