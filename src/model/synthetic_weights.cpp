// Synthetic Beam models: slice_config cuts a config to a few layers; make_synthetic_weights lays
// every tensor out in one device arena (first a plan of shapes, then one allocation, then one
// fill_random per tensor with its own seed).
#include "model/synthetic_weights.h"

#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/fill.h"
#include "model/device_weights.h"

namespace beam {
namespace {

constexpr int64_t kAlign = 256;

// How a tensor's values are drawn.
enum class Init { kMatrix, kNorm, kBias };

struct PlannedTensor {
  TensorView* view;
  DType dtype;
  Shape shape;
  Init init;
};

// The shapes of every tensor of `config` in rank slice `s` (views point into `w`, filled in later).
std::vector<PlannedTensor> plan_tensors(const BeamConfig& c, const ShardShape& s, BeamWeights& w) {
  const int64_t H = c.hidden_size, V = c.vocab_size, D = c.head_dim, Nq = s.num_heads,
                Nkv = s.num_kv_heads;
  const int64_t I = s.intermediate, Im = c.moe_intermediate_size, E = s.num_experts;
  std::vector<PlannedTensor> p;
  auto add = [&p](TensorView& v, DType dt, Shape s, Init init) { p.push_back({&v, dt, s, init}); };
  add(w.embed, DType::kBF16, {V, H}, Init::kMatrix);
  add(w.final_norm, DType::kBF16, {H}, Init::kNorm);
  if (!c.tie_word_embeddings) add(w.lm_head, DType::kBF16, {s.vocab, H}, Init::kMatrix);
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    for (TensorView* n : {&lw.input_norm, &lw.post_attn_norm, &lw.pre_mlp_norm, &lw.post_mlp_norm})
      add(*n, DType::kBF16, {H}, Init::kNorm);
    add(lw.attn.qkvg, DType::kBF16, {2 * Nq * D + 2 * Nkv * D, H}, Init::kMatrix);
    add(lw.attn.gate_bias, DType::kBF16, {Nq}, Init::kBias);
    add(lw.attn.q_norm, DType::kBF16, {D}, Init::kNorm);
    add(lw.attn.k_norm, DType::kBF16, {D}, Init::kNorm);
    add(lw.attn.o_proj, DType::kBF16, {H, Nq * D}, Init::kMatrix);
    switch (c.mlp_layer_types[static_cast<size_t>(l)]) {
      case MlpKind::kDense:
        add(lw.dense.gate_up, DType::kBF16, {2 * I, H}, Init::kMatrix);
        add(lw.dense.down, DType::kBF16, {H, I}, Init::kMatrix);
        break;
      case MlpKind::kSparse:
        add(lw.moe.router, DType::kF32, {c.num_experts, H}, Init::kMatrix);
        add(lw.moe.router_bias, DType::kF32, {c.num_experts}, Init::kBias);
        add(lw.moe.experts_gate_up, DType::kBF16, {E, 2 * Im, H}, Init::kMatrix);
        add(lw.moe.experts_down, DType::kBF16, {E, H, Im}, Init::kMatrix);
        break;
    }
  }
  return p;
}

int64_t aligned_bytes(const PlannedTensor& t) {
  const int64_t n = t.shape.numel() * static_cast<int64_t>(dtype_size(t.dtype));
  return (n + kAlign - 1) / kAlign * kAlign;
}

// A per-tensor seed: the run's seed mixed with the tensor's index.
uint64_t tensor_seed(uint64_t seed, size_t index) {
  return seed * 0x2545F4914F6CDD1Dull + (static_cast<uint64_t>(index) + 1) * 0x9E3779B97F4A7C15ull;
}

}  // namespace

Expected<BeamConfig> slice_config(const BeamConfig& base, const SliceOptions& o) {
  if (o.num_layers < 1)
    return make_error("slice_config: num_layers must be >= 1, got " + std::to_string(o.num_layers));
  if (o.num_dense_layers < 0 || o.num_dense_layers > o.num_layers)
    return make_error("slice_config: num_dense_layers must be in [0, " +
                      std::to_string(o.num_layers) + "], got " +
                      std::to_string(o.num_dense_layers));
  if (o.num_dense_layers < o.num_layers && base.num_experts <= 0)
    return make_error("slice_config: MoE layers requested but the base config has no experts");
  BeamConfig c = base;
  c.num_layers = o.num_layers;
  c.layer_types.assign(static_cast<size_t>(o.num_layers), AttentionKind::kSliding);
  c.mlp_layer_types.assign(static_cast<size_t>(o.num_layers), MlpKind::kSparse);
  for (int64_t l = 0; l < o.num_layers; ++l) {
    const bool full = l % 6 == 5 || (o.num_layers >= 2 && l == o.num_layers - 1);
    c.layer_types[static_cast<size_t>(l)] = full ? AttentionKind::kFull : AttentionKind::kSliding;
    if (l < o.num_dense_layers) c.mlp_layer_types[static_cast<size_t>(l)] = MlpKind::kDense;
  }
  return c;
}

int64_t synthetic_weight_bytes(const BeamConfig& config) {
  BeamWeights w;
  int64_t total = 0;
  for (const PlannedTensor& t : plan_tensors(config, shard_shape(config, {0, 1}), w))
    total += aligned_bytes(t);
  return total;
}

Expected<std::shared_ptr<const BeamWeights>> synthetic_layout(const BeamConfig& config,
                                                              const SyntheticWeightOptions& options,
                                                              TensorParallel tp) {
  BEAM_RETURN_IF_ERROR(check_tensor_parallel(config, tp.size));
  const ShardShape s = shard_shape(config, tp);
  auto w = std::make_shared<BeamWeights>();
  w->config = config;
  w->first_expert = s.first_expert;
  w->synthetic = SyntheticFill{options, tp.rank, tp.size};
  for (const PlannedTensor& t : plan_tensors(config, s, *w))
    *t.view = TensorView{nullptr, t.dtype, t.shape, Device::kCpu};
  if (config.tie_word_embeddings)
    w->lm_head = TensorView{nullptr, DType::kBF16, Shape{s.vocab, config.hidden_size}, Device::kCpu};
  return std::shared_ptr<const BeamWeights>(std::move(w));
}

Expected<DeviceWeights> fill_synthetic(const KernelContext& device_ctx, const BeamWeights& layout,
                                       bool releasable) {
  BEAM_CHECK(layout.synthetic.has_value()) << "fill_synthetic: not a synthetic layout";
  std::optional<ThreadPool> own_pool;  // the CPU fill's threads when the caller has none
  KernelContext ctx = device_ctx;
  if (ctx.device == Device::kCpu && ctx.pool == nullptr) ctx.pool = &own_pool.emplace(0);
  const SyntheticFill& fill = *layout.synthetic;
  const SyntheticWeightOptions& o = fill.options;
  const BeamConfig& config = layout.config;
  const ShardShape s = shard_shape(config, {fill.tp_rank, fill.tp_size});
  auto w = std::make_shared<BeamWeights>();
  w->config = config;
  w->first_expert = s.first_expert;
  std::vector<PlannedTensor> plan = plan_tensors(config, s, *w);
  int64_t total = 0;
  for (const PlannedTensor& t : plan) total += aligned_bytes(t);
  BEAM_ASSIGN_OR_RETURN(WeightArena arena,
                        allocate_weight_arena(ctx, static_cast<size_t>(total), releasable));
  char* base = static_cast<char*>(arena.buffer.data());
  int64_t offset = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedTensor& t = plan[i];
    *t.view = TensorView{base + offset, t.dtype, t.shape, ctx.device};
    offset += aligned_bytes(t);
    switch (t.init) {
      case Init::kMatrix:
        fill_random(ctx, *t.view, tensor_seed(o.seed, i), o.matrix_std);
        break;
      case Init::kNorm:
        fill_random(ctx, *t.view, tensor_seed(o.seed, i), o.norm_std, 1.0f);
        break;
      case Init::kBias:
        fill_random(ctx, *t.view, tensor_seed(o.seed, i), o.bias_std);
        break;
    }
  }
  if (config.tie_word_embeddings)
    w->lm_head = fill.tp_size == 1 ? w->embed : w->embed.rows(s.first_vocab, s.vocab);
  // The experts in the device's layout, so a seed gives the same logical weights on every device.
  BEAM_RETURN_IF_ERROR(pack_moe_weights(ctx, *w));
  synchronize(ctx);
  w->storage.push_back(arena.buffer.owner());
  return DeviceWeights{std::move(w), ctx.device == Device::kCpu ? 0 : total,
                       std::move(arena.memory)};
}

Expected<std::shared_ptr<BeamWeights>> make_synthetic_weights(const KernelContext& ctx,
                                                              const BeamConfig& config,
                                                              const SyntheticWeightOptions& o) {
  BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const BeamWeights> layout, synthetic_layout(config, o));
  BEAM_ASSIGN_OR_RETURN(DeviceWeights filled, fill_synthetic(ctx, *layout, false));
  return std::const_pointer_cast<BeamWeights>(filled.weights);
}

RankWeights synthetic_rank_weights(BeamConfig config, SyntheticWeightOptions options) {
  return [config = std::move(config), options](TensorParallel tp) {
    return synthetic_layout(config, options, tp);
  };
}

}  // namespace beam
