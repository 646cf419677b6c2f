// Parameter counts and loaded weight bytes of a Beam model, computed from its config alone.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace beam {

// Parameters by component. "Active" = what one token's forward reads: everything except the
// routed experts it does not select (num_experts_per_tok of n_routed_experts per sparse layer).
struct ParamCounts {
  int64_t embedding = 0;       // V x H
  int64_t lm_head = 0;         // V x H, 0 when tied to the embedding
  int64_t attention = 0;       // q, k, v, gate, o projections + gate bias + q/k norms, all layers
  int64_t norms = 0;           // 4 per layer + final norm
  int64_t dense_mlp = 0;       // gate, up, down of the dense layers
  int64_t routers = 0;         // router weights + correction biases of the sparse layers
  int64_t experts_total = 0;   // every routed expert of every sparse layer
  int64_t experts_active = 0;  // num_experts_per_tok experts per sparse layer

  int64_t total() const {
    return embedding + lm_head + attention + norms + dense_mlp + routers + experts_total;
  }
  int64_t active() const {
    return embedding + lm_head + attention + norms + dense_mlp + routers + experts_active;
  }
};

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
