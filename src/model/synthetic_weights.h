// Synthetic models for benchmarks and tests: a BeamConfig cut to a few layers (beam-slice: the full
// model's widths, 1 dense + 5 MoE layers by default) and random weights generated on the device
// with fill_random, scaled like a trained model (matrices std 0.02, norm weights ≈ 1).
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "kernels/api/context.h"
#include "model/config.h"
#include "model/weights.h"

namespace beam {

struct SliceOptions {
  int64_t num_layers = 6;        // total decoder layers
  int64_t num_dense_layers = 1;  // leading dense-MLP layers; the rest are routed MoE
};

// `base` with num_layers layers: the first num_dense_layers dense, the rest sparse; attention in
// Beam's pattern (BEAM.md 0a: every sixth layer full, five sliding before it) and, with two or
// more layers, the last layer full (the stack ends with a global layer). Errors name the field.
Expected<BeamConfig> slice_config(const BeamConfig& base, const SliceOptions& options);

struct SyntheticWeightOptions {
  uint64_t seed = 1;
  float matrix_std = 0.02f;  // every projection, embedding, LM head and the fp32 router
  float norm_std = 0.02f;    // norm weights: 1 + N(0, norm_std)
  float bias_std = 0.02f;    // output-gate bias and the router correction bias
};

// Every tensor of `config` in one arena on ctx.device (256-byte aligned tensors), filled on that
// device; the returned weights own the arena. An error when the device is out of memory.
Expected<std::shared_ptr<BeamWeights>> make_synthetic_weights(
    const KernelContext& ctx, const BeamConfig& config, const SyntheticWeightOptions& options);

// Bytes make_synthetic_weights allocates for `config` (to check it fits before allocating).
int64_t synthetic_weight_bytes(const BeamConfig& config);

}  // namespace beam
