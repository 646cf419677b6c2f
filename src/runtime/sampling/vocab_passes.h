// The sampler's full-vocabulary passes (max, exp weights, exp sums) in one fixed order: 8 lanes,
// lane l takes the elements i ≡ l (mod 8) in increasing i, lanes summed 0..7 in double. AVX2 when
// the build targets it, else the same order in scalar code, so both builds agree exactly.
#pragma once

#include <span>

#include "runtime/sampling/token_candidate.h"

namespace beam {

// Largest value (NaN entries are skipped); -inf for an empty or all -inf/NaN span.
float max_value(std::span<const float> values);
float max_value(std::span<const TokenCandidate> candidates);

// Sum over i of exp((values[i] - max) * inv_scale); each term <= 1 when max is the maximum.
double sum_exp(std::span<const float> values, float max, float inv_scale);

// candidates[i].value = exp((candidates[i].value - max) * inv_scale); returns their sum.
double exp_weights_in_place(std::span<TokenCandidate> candidates, float max, float inv_scale);

}  // namespace beam
