// DecodeGraphs: CUDA graphs of decode and verification steps, one per row-count bucket (1, 2,
// 4 ... 128, 160, 192, 256 new tokens) and per LoRA use (batches where some sequence has an
// adapter capture the LoRA ops; others do not, so a LoRA-enabled model pays nothing for
// base-model batches), captured lazily and replayed with the step's metadata uploaded to fixed
// addresses first (docs/runtime.md, Device). A graph serves any batch of its rows: one new token
// a sequence (decodes) or a few with every token's logits (speculative verification; a short
// prompt's prompt-logprobs chunk), mixed. Prefill chunks that take the last logits only never
// come here.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "core/status.h"
#include "kernels/api/device_memory.h"
#include "model/lazy_graph.h"
#include "model/beam/workspace.h"
#include "model/config.h"
#include "model/forward_batch.h"

namespace beam {

// Owned by BeamModel (one thread). Its workspace is sized for the largest bucket on first use and
// never grows, so every captured graph reads the same activation and metadata addresses.
class DecodeGraphs {
 public:
  // 160 and 192 spare batches 129-192 the dense layers' and attention's work on 256 rows.
  static constexpr std::array<int64_t, 11> kBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 160, 192, 256};
  // Queues the device work of one step over ws's uploaded metadata with fixed-plan attention
  // (slot 0 full pool, slot 1 sliding pool) and computes the logits of all ws.logit_rows.
  using EnqueueStep = std::function<void(Workspace& ws, const KvLayers& kv)>;

  // Most new tokens of one sequence in a graphed step (a verification's block; the eager path
  // too runs chunks this short as decode rows of the attention).
  static constexpr int64_t kMaxRowsPerSeq = 32;

  // Whether batch runs here: CUDA with ctx.cuda_graphs, no capture_routing, 1..256 new tokens in
  // all, each sequence with one new token or with all_logits and at most kMaxRowsPerSeq, and in a
  // batch-invariant context none of them a prompt token (SeqChunk::num_prompt).
  // capture_layers may be set: the graphs then copy those layers' residuals into
  // workspace().captured (a batch with another set than the last one's drops every graph first).
  static bool eligible(const KernelContext& ctx, const ForwardBatch& batch);

  // Runs a validated eligible batch padded to its bucket: the first use of a bucket runs eagerly
  // (warming scratch and cuBLASLt plans), the second captures, later ones replay. Graphs are
  // dropped and recaptured when the context's scratch or the KV memory moved. On return the
  // logits rows (batch order, as ForwardOutput's) lead workspace().logits, still on the device
  // (not synchronized).
  // shard: the model's share of the heads, widths and vocabulary (all of them unless
  // shard_buffers names a tensor-parallel rank, whose graphs capture its collectives too).
  Status run(const KernelContext& ctx, const BeamConfig& cfg, const ShardShape& shard,
             ShardBuffers shard_buffers,
             const ForwardBatch& batch, const KvLayers& kv, const EnqueueStep& enqueue);

  // Drops every captured graph (the next use of a bucket captures again): after what they captured
  // stopped being valid outside the memory the fingerprint watches (a tensor-parallel group's new
  // communicators).
  void drop_graphs();

  const Workspace& workspace() const { return ws_; }
  int64_t num_captures() const { return captures_; }  // graphs captured so far (tests)
  int64_t num_replays() const { return replays_; }    // graph launches so far (tests)

 private:
  static size_t bucket_index(int64_t rows);
  void plan_attention(const KernelContext& ctx, const BeamConfig& cfg, int64_t num_heads,
                      const KvLayers& kv);

  Workspace ws_;
  bool reserved_ = false;
  // [0]: no sequence has a LoRA slot; [1]: some do.
  std::array<std::array<LazyGraph, kBuckets.size()>, 2> buckets_;
  uint64_t fingerprint_ = 0;  // scratch + KV memory the captured graphs point into
  int64_t captures_ = 0, replays_ = 0;
};

}  // namespace beam
