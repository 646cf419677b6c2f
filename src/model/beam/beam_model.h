// BeamModel: the Beam forward pass (BEAM.md §3) as a straight-line sequence of kernel calls per
// layer, over a batch of sequences that read and write a paged KV cache.
#pragma once

#include <memory>

#include "core/status.h"
#include "kernels/api/context.h"
#include "model/beam/workspace.h"
#include "model/forward_batch.h"
#include "model/weights.h"

namespace beam {

// Owned by one thread (the engine's); forward() reuses its workspace between calls. Weights, KV
// memory and activations live on ctx's device; forward() returns when the logits are on the host.
class BeamModel {
 public:
  // weights must be on ctx.device (upload_weights in model/device_weights.h).
  BeamModel(std::shared_ptr<const BeamWeights> weights, KernelContext ctx);

  const BeamConfig& config() const { return weights_->config; }
  const BeamWeights& weights() const { return *weights_; }
  const KernelContext& context() const { return ctx_; }

  // Validates the batch (token ids in range, block tables long enough, positions ≥ 0), writes the
  // new tokens' K/V into kv and fills out with the soft-capped logits of the requested rows.
  // kv.layers must hold one PagedKv per layer.
  Status forward(const ForwardBatch& batch, const KvLayers& kv, ForwardOutput& out);

 private:
  Status validate(const ForwardBatch& batch, const KvLayers& kv) const;
  void prepare_step(const ForwardBatch& batch, int64_t block_size);
  void attention_block(int64_t layer, const KvLayers& kv, int64_t num_tokens);
  void mlp_block(int64_t layer, int64_t num_tokens, int64_t sparse_index, bool capture);
  void compute_logits(const ForwardBatch& batch, int64_t num_tokens, ForwardOutput& out);

  std::shared_ptr<const BeamWeights> weights_;
  KernelContext ctx_;
  Workspace ws_;
};

}  // namespace beam
