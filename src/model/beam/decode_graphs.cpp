// DecodeGraphs: bucket choice, padding, fixed attention plans, lazy capture and replay, and the
// invalidation rule (graph_fingerprint of the context mixed with the KV layers' addresses).
#include "model/beam/decode_graphs.h"

#include <string>

#include "core/check.h"
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
  const bool invariant = batch_invariant(ctx);
  for (const SeqChunk& s : batch.seqs) {
    const auto n = static_cast<int64_t>(s.tokens.size());
    if (n != 1 && !(s.all_logits && n > 1 && n <= kMaxRowsPerSeq)) return false;
    // Invariant: prompt rows run on the prefill attention kernel, which graphs do not replay.
    if (invariant && s.num_cached < s.num_prompt) return false;
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

void DecodeGraphs::drop_graphs() {
  for (auto& variant : buckets_)
    for (LazyGraph& b : variant) b.drop();
}

Status DecodeGraphs::run(const KernelContext& ctx, const BeamConfig& cfg, const ShardShape& shard,
                         ShardBuffers shard_buffers, const ForwardBatch& batch, const KvLayers& kv,
                         const EnqueueStep& enqueue) {
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
      for (LazyGraph& b : variant) b = LazyGraph();  // warm again: the copies are new work
  }
  ws_.build(batch, kv.layers[0].block_size);
  const size_t index = bucket_index(ws_.num_tokens());
  const int64_t rows = kBuckets[index];
  ws_.pad_decode(rows);
  ws_.upload(ctx);
  plan_attention(ctx, cfg, shard.num_heads,
                 kv);  // may grow the fixed plans, which changes the fingerprint

  const uint64_t fingerprint = mix_kv(graph_fingerprint(ctx), kv);
  if (fingerprint != fingerprint_) {
    drop_graphs();
    fingerprint_ = fingerprint;
  }
  const LazyGraph::Ran ran =
      buckets_[ws_.any_lora ? 1 : 0][index].run(ctx, [&] { enqueue(ws_, kv); },
                                                "decode graph of " + std::to_string(rows) + " rows");
  if (ran == LazyGraph::Ran::kCaptured) {
    BEAM_CHECK(mix_kv(graph_fingerprint(ctx), kv) == fingerprint_)
        << "DecodeGraphs: scratch memory moved during a capture (the bucket was warmed)";
    ++captures_;
  }
  if (ran != LazyGraph::Ran::kEager) ++replays_;
  return ok_status();
}

}  // namespace beam
