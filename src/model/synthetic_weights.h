// Synthetic models for benchmarks and tests: a BeamConfig cut to a few layers (beam-slice: the full
// model's widths, 1 dense + 5 MoE layers by default) and random weights generated on the device
// with fill_random, scaled like a trained model (matrices std 0.02, norm weights ≈ 1).
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "kernels/api/context.h"
#include "model/config.h"
#include "model/device_weights.h"
#include "model/tensor_parallel.h"
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

// Every tensor of `config` in one arena on ctx.device (256-byte aligned tensors), filled on that
// device; the returned weights own the arena. An error when the device is out of memory.
Expected<std::shared_ptr<BeamWeights>> make_synthetic_weights(
    const KernelContext& ctx, const BeamConfig& config, const SyntheticWeightOptions& options);

// Bytes make_synthetic_weights allocates for `config` (to check it fits before allocating).
int64_t synthetic_weight_bytes(const BeamConfig& config);

// Rank tp's synthetic weights before they exist (BeamWeights::synthetic set): every view with the
// shape and dtype of rank tp's slice (shard_beam_weights') and no data, so no host memory holds
// them; upload_weights fills them on its device (fill_synthetic). Replicated tensors (embedding,
// norms, router) get the same values on every rank. Errors: tp does not divide the model.
Expected<std::shared_ptr<const BeamWeights>> synthetic_layout(const BeamConfig& config,
                                                              const SyntheticWeightOptions& options,
                                                              TensorParallel tp = {0, 1});
// A synthetic layout's tensors in one arena on ctx.device (ReleasableMemory when `releasable`),
// filled there (on the CPU by ctx.pool, or threads of its own without one), experts packed for
// the device. Errors: the device is out of memory.
Expected<DeviceWeights> fill_synthetic(const KernelContext& ctx, const BeamWeights& layout,
                                       bool releasable);
// Each rank's synthetic layout (serve / generate / bench offline --load-format dummy: the model
// folder's config without its checkpoint, as vLLM's and SGLang's dummy load format).
RankWeights synthetic_rank_weights(BeamConfig config, SyntheticWeightOptions options);

}  // namespace beam
