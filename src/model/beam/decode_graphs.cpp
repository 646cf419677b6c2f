// DecodeGraphs: bucket choice, padding, fixed attention plans, lazy capture and replay, and the
// invalidation rule (graph_fingerprint of the context mixed with the KV layers' addresses).
#include "model/beam/decode_graphs.h"

#include <algorithm>
#include <string>

#include "core/logging.h"
#include "kernels/api/fixed_attention.h"

namespace beam {
namespace {

constexpr int kFullSlot = 0, kSlidingSlot = 1;

// Mixes the KV layers' memory and geometry into h: graphs bake those addresses in.
uint64_t mix_kv(uint64_t h, const KvLayers& kv) {
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const PagedKv& layer : kv.layers) {
    mix(reinterpret_cast<uintptr_t>(layer.k.data));
    mix(reinterpret_cast<uintptr_t>(layer.v.data));
    mix(static_cast<uint64_t>(layer.k.dim(0)));
    mix(static_cast<uint64_t>(layer.block_size));
  }
  return h;
}

// The first layer of kind `kind`, or -1.
int64_t first_layer(const BeamConfig& cfg, AttentionKind kind) {
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    if (cfg.layer_types[l] == kind) return l;
  return -1;
}

}  // namespace

bool DecodeGraphs::eligible(const KernelContext& ctx, const ForwardBatch& batch) {
  if (ctx.device != Device::kCuda || !ctx.cuda_graphs || batch.capture_routing) return false;
  if (batch.seqs.empty()) return false;
  int64_t rows = 0;
  for (const SeqChunk& s : batch.seqs) {
    const auto n = static_cast<int64_t>(s.tokens.size());
    if (n != 1 && !(s.all_logits && n > 1 && n <= kMaxRowsPerSeq)) return false;
    rows += n;
  }
  return rows <= kBuckets.back();
}

size_t DecodeGraphs::bucket_index(int64_t rows) {
  size_t i = 0;
  while (kBuckets[i] < rows) ++i;
  return i;
}

void DecodeGraphs::plan_attention(const KernelContext& ctx, const BeamConfig& cfg,
                                  int64_t num_heads, const KvLayers& kv) {
  const int64_t rows = ws_.num_tokens();
  const int64_t full = first_layer(cfg, AttentionKind::kFull);
  const int64_t sliding = first_layer(cfg, AttentionKind::kSliding);
  if (full >= 0)
    plan_fixed_attention(ctx, kFullSlot, kv.layers[full], rows, num_heads, cfg.head_dim,
                         ws_.full_seqs, 0);
  if (sliding >= 0)
    plan_fixed_attention(ctx, kSlidingSlot, kv.layers[sliding], rows, num_heads, cfg.head_dim,
                         ws_.sliding_seqs, cfg.sliding_window);
}

Status DecodeGraphs::capture(const KernelContext& ctx, Bucket& bucket, const KvLayers& kv,
                             const EnqueueStep& enqueue) {
  begin_graph_capture(ctx);
  enqueue(ws_, kv);
  Expected<StepGraph> graph = end_graph_capture(ctx);
  if (!graph.ok()) return make_error("decode graph of " + std::to_string(ws_.num_tokens()) +
                                     " rows: " + graph.error().message);
  BEAM_CHECK(mix_kv(graph_fingerprint(ctx), kv) == fingerprint_)
      << "DecodeGraphs: scratch memory moved during a capture (the bucket was warmed)";
  bucket.graph = std::move(*graph);
  ++captures_;
  return ok_status();
}

void DecodeGraphs::drop_graphs() {
  for (auto& variant : buckets_)
    for (Bucket& b : variant) b.graph = StepGraph();
}

Status DecodeGraphs::run(const KernelContext& ctx, const BeamConfig& cfg, const ShardShape& shard,
                         ShardBuffers shard_buffers, const ForwardBatch& batch, const KvLayers& kv,
                         const EnqueueStep& enqueue) {
  int64_t new_tokens = 0;
  for (const SeqChunk& s : batch.seqs) new_tokens += static_cast<int64_t>(s.tokens.size());
  const size_t index = bucket_index(new_tokens);
  const int64_t rows = kBuckets[index];
  if (!reserved_) {  // the largest bucket up front: the workspace never moves afterwards
    BEAM_RETURN_IF_ERROR(
        ws_.reserve(ctx, cfg, shard, kBuckets.back(), kBuckets.back(), false, shard_buffers));
    reserved_ = true;
  }
  if (batch.capture_layers != ws_.capture_layers) {  // graphs copy out other layers' residuals
    const size_t bytes = static_cast<size_t>(kBuckets.back()) * batch.capture_layers.size() *
                         static_cast<size_t>(cfg.hidden_size) * sizeof(uint16_t);
    if (bytes > ws_.captured.capacity()) BEAM_RETURN_IF_ERROR(ws_.captured.reserve(ctx, bytes));
    ws_.capture_layers = batch.capture_layers;
    for (auto& variant : buckets_)
      for (Bucket& b : variant) b = Bucket{};  // warm again: the copies are new work
  }
  ws_.build(batch, kv.layers[0].block_size);
  ws_.pad_decode(rows);
  ws_.upload(ctx);
  plan_attention(ctx, cfg, shard.num_heads,
                 kv);  // may grow the fixed plans, which changes the fingerprint

  const uint64_t fingerprint = mix_kv(graph_fingerprint(ctx), kv);
  if (fingerprint != fingerprint_) {
    drop_graphs();
    fingerprint_ = fingerprint;
  }
  Bucket& bucket = buckets_[ws_.any_lora ? 1 : 0][index];
  if (!bucket.warmed) {
    enqueue(ws_, kv);
    bucket.warmed = true;
    return ok_status();
  }
  if (bucket.capture_failed) {
    enqueue(ws_, kv);
    return ok_status();
  }
  if (!bucket.graph.valid()) {
    Status st = capture(ctx, bucket, kv, enqueue);
    if (!st.ok()) {  // this bucket runs uncaptured from now on (same kernels, same results)
      log_warning(st.error().message + "; running the bucket without a graph");
      bucket.capture_failed = true;
      enqueue(ws_, kv);
      return ok_status();
    }
  }
  launch_graph(ctx, bucket.graph);
  ++replays_;
  return ok_status();
}

}  // namespace beam
