// Slicing a Beam model's host weights for one tensor-parallel rank (tensor_parallel.h).
#include "model/tensor_parallel.h"

#include <cstring>
#include <string>

namespace beam {
namespace {

// A host copy of row ranges [begin, begin + count) of the 2-D tensors `parts` (one dtype and
// width), stacked in order.
struct RowRange {
  const TensorView* t;
  int64_t begin, count;
};

TensorView stack_rows(std::initializer_list<RowRange> parts, BeamWeights& owner) {
  const TensorView& first = *parts.begin()->t;
  int64_t rows = 0;
  for (const RowRange& p : parts) rows += p.count;
  auto buffer = std::make_shared<HostTensor>(first.dtype, Shape{rows, first.dim(1)});
  char* dst = static_cast<char*>(buffer->view.data);
  for (const RowRange& p : parts) {
    const TensorView src = p.t->rows(p.begin, p.count);
    std::memcpy(dst, src.data, src.nbytes());
    dst += src.nbytes();
  }
  owner.storage.push_back(buffer);
  return buffer->view;
}

// A host copy of columns [begin, begin + count) of the 2-D tensor t.
TensorView slice_columns(const TensorView& t, int64_t begin, int64_t count, BeamWeights& owner) {
  auto buffer = std::make_shared<HostTensor>(t.dtype, Shape{t.dim(0), count});
  const size_t elem = dtype_size(t.dtype);
  const auto* src = static_cast<const char*>(t.data);
  auto* dst = static_cast<char*>(buffer->view.data);
  for (int64_t r = 0; r < t.dim(0); ++r)
    std::memcpy(dst + r * count * elem, src + (r * t.dim(1) + begin) * elem, count * elem);
  owner.storage.push_back(buffer);
  return buffer->view;
}

void shard_attention(const BeamConfig& cfg, const ShardShape& s, TensorParallel tp,
                     const AttentionWeights& full, AttentionWeights& out, BeamWeights& owner) {
  const int64_t D = cfg.head_dim, q_rows = s.num_heads * D, kv_rows = s.num_kv_heads * D;
  const int64_t k0 = cfg.q_width(), v0 = k0 + cfg.kv_width(), g0 = v0 + cfg.kv_width();
  const int64_t q_begin = tp.rank * q_rows, kv_begin = tp.rank * kv_rows;
  out.qkvg = stack_rows({{&full.qkvg, q_begin, q_rows},
                         {&full.qkvg, k0 + kv_begin, kv_rows},
                         {&full.qkvg, v0 + kv_begin, kv_rows},
                         {&full.qkvg, g0 + q_begin, q_rows}},
                        owner);
  out.gate_bias = full.gate_bias.rows(tp.rank * s.num_heads, s.num_heads);
  out.q_norm = full.q_norm;
  out.k_norm = full.k_norm;
  out.o_proj = slice_columns(full.o_proj, q_begin, q_rows, owner);
}

// Experts [first, first + count) of a routed-expert matrix; a deferred one (no data) stays one.
TensorView expert_rows(const TensorView& matrix, int64_t first, int64_t count) {
  if (matrix.data != nullptr) return matrix.rows(first, count);
  TensorView v = matrix;
  v.shape.dims[0] = count;
  return v;
}

// held_first: the first expert `full`'s expert tensors hold (BeamWeights::first_expert).
void shard_layer(const BeamConfig& cfg, const ShardShape& s, TensorParallel tp, MlpKind kind,
                 int64_t held_first, const LayerWeights& full, LayerWeights& out,
                 BeamWeights& owner) {
  out.input_norm = full.input_norm;
  out.post_attn_norm = full.post_attn_norm;
  out.pre_mlp_norm = full.pre_mlp_norm;
  out.post_mlp_norm = full.post_mlp_norm;
  shard_attention(cfg, s, tp, full.attn, out.attn, owner);
  switch (kind) {
    case MlpKind::kDense: {
      const int64_t I = cfg.intermediate_size, begin = tp.rank * s.intermediate;
      out.dense.gate_up = stack_rows({{&full.dense.gate_up, begin, s.intermediate},
                                      {&full.dense.gate_up, I + begin, s.intermediate}},
                                     owner);
      out.dense.down = slice_columns(full.dense.down, begin, s.intermediate, owner);
      break;
    }
    case MlpKind::kSparse: {
      out.moe.router = full.moe.router;
      out.moe.router_bias = full.moe.router_bias;
      const int64_t first = s.first_expert - held_first;  // the rank's experts within those held
      out.moe.experts_gate_up = expert_rows(full.moe.experts_gate_up, first, s.num_experts);
      out.moe.experts_down = expert_rows(full.moe.experts_down, first, s.num_experts);
      break;
    }
  }
}

}  // namespace

Status check_tensor_parallel(const BeamConfig& config, int size) {
  if (size < 1)
    return make_error("tensor parallel size " + std::to_string(size) + ": must be >= 1");
  std::string bad;
  auto need = [&](const char* what, int64_t n) {
    if (n % size != 0) bad += std::string(bad.empty() ? "" : ", ") + what + " " + std::to_string(n);
  };
  need("num_key_value_heads", config.num_kv_heads);
  need("num_attention_heads", config.num_heads);
  if (config.num_layers_of(MlpKind::kDense) > 0)
    need("intermediate_size", config.intermediate_size);
  if (config.num_layers_of(MlpKind::kSparse) > 0) need("n_routed_experts", config.num_experts);
  need("vocab_size", config.vocab_size);
  if (bad.empty()) return ok_status();
  return make_error("tensor parallel size " + std::to_string(size) +
                    " does not divide the model's " + bad +
                    " (each rank holds an equal share of the KV heads, q heads, dense width, "
                    "experts and vocabulary)");
}

ShardShape shard_shape(const BeamConfig& config, TensorParallel tp) {
  BEAM_CHECK(tp.size >= 1 && tp.rank >= 0 && tp.rank < tp.size)
      << "rank " << tp.rank << " of " << tp.size;
  ShardShape s;
  s.num_heads = config.num_heads / tp.size;
  s.num_kv_heads = config.num_kv_heads / tp.size;
  s.intermediate = config.intermediate_size / tp.size;
  s.num_experts = config.num_experts / tp.size;
  s.first_expert = tp.rank * s.num_experts;
  s.vocab = config.vocab_size / tp.size;
  s.first_vocab = tp.rank * s.vocab;
  return s;
}

Expected<std::shared_ptr<const BeamWeights>> shard_beam_weights(
    const std::shared_ptr<const BeamWeights>& full, TensorParallel tp) {
  const BeamConfig& cfg = full->config;
  BEAM_RETURN_IF_ERROR(check_tensor_parallel(cfg, tp.size));
  const ShardShape s = shard_shape(cfg, tp);
  if (full->synthetic) {  // a layout is made for one rank (synthetic_layout)
    if (full->synthetic->tp_rank != tp.rank || full->synthetic->tp_size != tp.size)
      return make_error("synthetic weights of rank " + std::to_string(full->synthetic->tp_rank) +
                        " of " + std::to_string(full->synthetic->tp_size) + " given to rank " +
                        std::to_string(tp.rank) + " of " + std::to_string(tp.size));
    return full;
  }
  // The rank's experts must be among those `full` holds (all of them, or a load of its slice).
  for (size_t l = 0; l < full->layers.size(); ++l) {
    if (cfg.mlp_layer_types[l] != MlpKind::kSparse) continue;
    const int64_t held = full->layers[l].moe.experts_gate_up.dim(0);
    if (s.first_expert < full->first_expert ||
        s.first_expert + s.num_experts > full->first_expert + held)
      return make_error("the weights hold experts [" + std::to_string(full->first_expert) + ", " +
                        std::to_string(full->first_expert + held) + "), rank " +
                        std::to_string(tp.rank) + " of " + std::to_string(tp.size) + " needs [" +
                        std::to_string(s.first_expert) + ", " +
                        std::to_string(s.first_expert + s.num_experts) + ")");
    break;
  }
  if (tp.size == 1) return full;
  if (full->embed.device != Device::kCpu)
    return make_error(
        "shard_beam_weights: the weights must be in host memory (slice before upload)");
  auto out = std::make_shared<BeamWeights>();
  out->config = cfg;
  out->first_expert = s.first_expert;
  out->storage.push_back(std::const_pointer_cast<BeamWeights>(full));  // the views' memory
  out->files = full->files;
  out->embed = full->embed;
  out->final_norm = full->final_norm;
  out->lm_head = full->lm_head.rows(s.first_vocab, s.vocab);
  out->layers.resize(full->layers.size());
  for (size_t l = 0; l < full->layers.size(); ++l)
    shard_layer(cfg, s, tp, cfg.mlp_layer_types[l], full->first_expert, full->layers[l],
                out->layers[l], *out);
  for (const DeferredExperts& d : full->deferred_experts) {  // the rank's experts' pieces
    DeferredExperts mine{d.layer, d.matrix, {}};
    for (const ExpertPiece& p : d.pieces)
      if (p.expert >= s.first_expert && p.expert < s.first_expert + s.num_experts)
        mine.pieces.push_back(p);
    out->deferred_experts.push_back(std::move(mine));
  }
  return std::shared_ptr<const BeamWeights>(std::move(out));
}

ExpertSlice rank_experts(const BeamConfig& config, TensorParallel tp) {
  const ShardShape s = shard_shape(config, tp);
  return ExpertSlice{s.first_expert, s.num_experts};
}

Expected<std::shared_ptr<const BeamWeights>> load_rank_slice(const RankWeights& source,
                                                             TensorParallel tp) {
  BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const BeamWeights> host, source(tp));
  if (!host) return make_error("no weights for rank " + std::to_string(tp.rank));
  return shard_beam_weights(host, tp);
}

RankWeights slices_of(std::shared_ptr<const BeamWeights> full) {
  return [full = std::move(full)](TensorParallel) -> Expected<std::shared_ptr<const BeamWeights>> {
    return full;
  };
}

RankWeights load_rank_weights(std::string model_dir, std::string lora_dir, ExpertCopy copy) {
  return [model_dir = std::move(model_dir), lora_dir = std::move(lora_dir), copy](
             TensorParallel tp) -> Expected<std::shared_ptr<const BeamWeights>> {
    BEAM_ASSIGN_OR_RETURN(BeamConfig config, load_beam_config(model_dir));
    BEAM_RETURN_IF_ERROR(check_tensor_parallel(config, tp.size));
    BEAM_ASSIGN_OR_RETURN(
        std::shared_ptr<BeamWeights> w,
        load_beam_weights_merging(model_dir, lora_dir, rank_experts(config, tp), copy));
    return std::shared_ptr<const BeamWeights>(std::move(w));
  };
}

}  // namespace beam
