// BeamModel: the Beam forward pass (BEAM.md §3) as a straight-line sequence of kernel calls per
// layer, over a batch of sequences that read and write a paged KV cache.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>

#include "core/status.h"
#include "kernels/api/context.h"
#include "model/beam/decode_graphs.h"
#include "model/beam/workspace.h"
#include "model/forward_batch.h"
#include "model/lora_slots.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"

namespace beam {

// Owned by one thread (the engine's); forward() reuses its workspace between calls. Weights, KV
// memory and activations live on ctx's device; forward() returns when the logits are on the host.
class BeamModel {
 public:
  // weights must be on ctx.device (upload_weights in model/device_weights.h). lora (optional,
  // on ctx.device): slots of adapters served per request; every step then adds each token's
  // slot's deltas (SeqChunk::lora_slot) to the linear outputs LoraSlots serves.
  // shard: a tensor-parallel rank's place (weights then shard_beam_weights' slice for it, the KV
  // cache its KV heads); every rank of the group runs forward() on the same batch at the same
  // time (model/tensor_parallel.h). Size > 1 runs without LoRA for now.
  BeamModel(std::shared_ptr<const BeamWeights> weights, KernelContext ctx,
            std::unique_ptr<LoraSlots> lora = nullptr, ModelShard shard = {});

  // The served architecture: fixed (replace_weights takes only weights of the same), so any
  // thread may read it while another replaces the weights.
  const BeamConfig& config() const { return config_; }
  const BeamWeights& weights() const { return *weights_; }
  const KernelContext& context() const { return ctx_; }
  TensorParallel tensor_parallel() const { return shard_.tp; }

  // Validates the batch (token ids in range, block tables long enough, positions ≥ 0), writes the
  // new tokens' K/V into kv and fills out with the soft-capped logits of the requested rows.
  // kv.layers must hold one PagedKv per layer.
  // On CUDA with ctx.cuda_graphs, decode-only batches replay CUDA graphs (decode_graphs.h);
  // the logits equal the eager path's. An op's scratch that does not fit the device's free
  // memory (kernels/api/device_out_of_memory.h) is an error, not an abort; the next call retries.
  Status forward(const ForwardBatch& batch, const KvLayers& kv, ForwardOutput& out);

  const DecodeGraphs& decode_graphs() const { return graphs_; }
  // DecodeGraphs::drop_graphs (a tensor-parallel group's communicators were made anew).
  void drop_decode_graphs() { graphs_.drop_graphs(); }
  // The adapter slots (null without); load and clear them between forward() calls only.
  LoraSlots* lora_slots() { return lora_.get(); }
  const LoraSlots* lora_slots() const { return lora_.get(); }
  // Gives the slots back (the engine's warm-up lends them to a scratch model); the model then
  // serves no adapters.
  std::unique_ptr<LoraSlots> release_lora_slots() { return std::move(lora_); }

  // Serves `host` (load_beam_weights' result, sliced for this rank) from now on: weights of the
  // same architecture (config_difference names the first key that differs: an error, nothing
  // changed). On the CPU the model reads them as they are; on CUDA they are copied over the device
  // weights in place (copy_weights_into), so decode graphs stay valid. Between forward() calls
  // only.
  // *partial (optional): set when the copy failed part way (copy_weights_into's).
  Status replace_weights(std::shared_ptr<const BeamWeights> host, bool* partial = nullptr);
  // Frees the eager steps' activations and metadata (the next eager step allocates them again;
  // the decode graphs keep theirs, whose addresses they captured) and returns the bytes freed:
  // sleep mode gives them back too (up to GiBs after a long step with every row's logits).
  // Between forward() calls only.
  size_t release_eager_workspace();

 private:
  // Which paged attention the layers call: the eager op over ws's host sequences, or the fixed
  // plans of decode graphs (slot 0 full, slot 1 sliding).
  enum class AttentionPath { kEager, kFixed };

  Status validate(const ForwardBatch& batch, const KvLayers& kv) const;
  // forward() without its boundary: throws DeviceOutOfMemory.
  Status run_step(const ForwardBatch& batch, const KvLayers& kv, ForwardOutput& out);
  // Queues every op of a step over ws (metadata uploaded): embedding, layers, logits of
  // ws.logit_rows into ws.logits. No host synchronization.
  void enqueue_step(Workspace& ws, const KvLayers& kv, AttentionPath path, bool capture_routing);
  void attention_block(Workspace& ws, int64_t layer, const KvLayers& kv, AttentionPath path);
  void mlp_block(Workspace& ws, int64_t layer, int64_t sparse_index, bool capture);
  void compute_logits(Workspace& ws);
  // Copies the residual after layer l into ws.captured's column block of each capture_layers
  // entry equal to l.
  void capture_residual(Workspace& ws, int64_t l);
  // A module whose LoRA deltas go to out[:, col0 :].
  struct LoraPart {
    LoraTarget target;
    TensorView out;
    int64_t col0 = 0;
  };
  // The LoRA deltas of layer l's modules `parts` (at most kMaxLoraOutputs), which share the input
  // x, for ws's tokens (logit rows for kLmHead) in one lora_add, when the model serves adapters and
  // some token of ws has one.
  void add_lora(const Workspace& ws, int64_t l, const TensorView& x,
                std::initializer_list<LoraPart> parts);
  // Layer l's expert LoRA for moe_experts when the model serves expert adapters and some token of
  // ws has one, else nullopt.
  std::optional<MoeLora> moe_lora(const Workspace& ws, int64_t l) const;
  // Copies the logits of batch's rows (the first rows of ws.logits) to out.
  void copy_logits(const Workspace& ws, const ForwardBatch& batch, ForwardOutput& out);
  // With batch.capture_layers: out.device_captured (captured_on_device) or captured_hidden, the
  // first num_tokens rows of ws.captured (after copy_logits synchronized on the host path).
  void copy_captured(const Workspace& ws, const ForwardBatch& batch, ForwardOutput& out);
  // out.final_hidden: the final-norm output of each chunk's tokens from its final_hidden_from on
  // (x's rows under ws.norm_every_row, else logit rows of final_hidden: then each such token is
  // one).
  void copy_final_hidden(const Workspace& ws, const ForwardBatch& batch, ForwardOutput& out);
  // out (bf16 [T, N]) = bf16 of part (f32 [T, N], this rank's partial sums) summed over the ranks:
  // by the group's all-reduce, or with deterministic inference gathered and summed in rank order
  // (part is left unsummed then).
  void reduce_partials(const TensorView& part, const TensorView& out);
  // ws.logits [R, V] from every rank's vocabulary slice (ws.local_logits [R, V / size]).
  void gather_logits(const Workspace& ws);
  // out [rows, n * c] = every rank's local [rows, c] side by side in rank order (through
  // gathered [n, rows, c]).
  void gather_columns(const TensorView& local, const TensorView& gathered, const TensorView& out);
  // The input a row-parallel module's adapter reads (o_proj's, the dense down's): x itself on one
  // rank or when the step applies no adapter there; on a rank, every rank's columns of x gathered.
  TensorView lora_input(const Workspace& ws, int64_t l, LoraTarget target, const TensorView& x);
  bool sharded() const { return shard_.tp.size > 1; }
  ShardBuffers shard_buffers() const {
    if (!sharded()) return ShardBuffers::kNone;
    return lora_ ? ShardBuffers::kRankWithLora : ShardBuffers::kRank;
  }

  std::shared_ptr<const BeamWeights> weights_;
  BeamConfig config_;  // weights_->config as first served
  KernelContext ctx_;
  std::unique_ptr<LoraSlots> lora_;
  ModelShard shard_;
  ShardShape shape_;  // this rank's heads, widths, experts and vocabulary
  Workspace ws_;  // eager steps
  DecodeGraphs graphs_;
};

}  // namespace beam
