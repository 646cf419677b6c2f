// Parameter counts and loaded weight bytes of a Beam model, computed from its config alone.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace beam {

// Parameters by component, counted in N (int64_t: exact; double: any sizes, no overflow).
// "Active" = what one token's forward reads: everything except the routed experts it does not
// select (num_experts_per_tok of n_routed_experts per sparse layer).
template <typename N>
struct BasicParamCounts {
  N embedding{};       // V x H
  N lm_head{};         // V x H, 0 when tied to the embedding
  N attention{};       // q, k, v, gate, o projections + gate bias + q/k norms, all layers
  N norms{};           // 4 per layer + final norm
  N dense_mlp{};       // gate, up, down of the dense layers
  N routers{};         // router weights + correction biases of the sparse layers
  N experts_total{};   // every routed expert of every sparse layer
  N experts_active{};  // num_experts_per_tok experts per sparse layer

  N total() const {
    return embedding + lm_head + attention + norms + dense_mlp + routers + experts_total;
  }
  N active() const {
    return embedding + lm_head + attention + norms + dense_mlp + routers + experts_active;
  }
};
using ParamCounts = BasicParamCounts<int64_t>;

// Exact; needs a config parse_beam_config accepted (its sizes keep every count in int64_t).
ParamCounts count_params(const BeamConfig& config);
// The total in double, for any sizes (parse_beam_config's bound on them).
double approximate_total_params(const BeamConfig& config);

// Bytes of the weights as load_beam_weights holds them: f32 router tensors, bf16 everything else.
struct WeightBytes {
  int64_t bf16_bytes = 0;
  int64_t f32_bytes = 0;
  int64_t total() const { return bf16_bytes + f32_bytes; }
};

WeightBytes weight_bytes(const BeamConfig& config);

}  // namespace beam
