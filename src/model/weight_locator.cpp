// locate_weight: parses BEAM.md 0a's names (global, per layer, per routed expert) into a region of
// the served layout; read_weight_part copies a region to the host as f32.
#include "model/weight_locator.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/api/device_memory.h"
#include "model/tensor_convert.h"

namespace beam {
namespace {

constexpr const char* kForms =
    "model.embed_tokens.weight, model.norm.weight, lm_head.weight, model.layers.L.<suffix> or "
    "model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight";

// Rows [first, first + rows) of the 2-D view m (a 1-D view counts as [n, 1]).
WeightLocation rows_of(const TensorView& m, Shape shape, WeightSplit split, int64_t first,
                       int64_t rows) {
  WeightLocation at;
  at.shape = shape;
  at.split = split;
  at.matrix = m;
  at.first_row = first;
  at.part_rows = rows;
  at.part_cols = m.shape.rank == 1 ? 1 : m.dim(1);
  return at;
}

// A whole view as a part.
WeightLocation whole(const TensorView& m, Shape shape, WeightSplit split) {
  return rows_of(m, shape, split, 0, m.dim(0));
}

// The number at the start of `s` and the rest after its '.', or nullopt.
std::optional<std::pair<int64_t, std::string_view>> leading_index(std::string_view s) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end == s.data() || end == s.data() + s.size() || *end != '.')
    return std::nullopt;
  return std::pair{value, s.substr(static_cast<size_t>(end - s.data()) + 1)};
}

Expected<WeightLocation> locate_expert(const BeamWeights& w, const ShardShape& s, int64_t layer,
                                       int64_t e, std::string_view part, const std::string& name) {
  const BeamConfig& c = w.config;
  const int64_t H = c.hidden_size, Im = c.moe_intermediate_size;
  if (e < 0 || e >= c.num_experts)
    return make_error("'" + name + "': expert " + std::to_string(e) + " of a model of " +
                      std::to_string(c.num_experts));
  const MoeWeights& m = w.layers[static_cast<size_t>(layer)].moe;
  const bool mine = e >= s.first_expert && e < s.first_expert + s.num_experts;
  WeightLocation at;
  at.split = WeightSplit::kExpert;
  at.expert = mine ? e - s.first_expert : -1;
  if (part == "gate_proj.weight" || part == "up_proj.weight") {
    at.shape = Shape{Im, H};
    at.matrix = m.experts_gate_up;
    at.expert_matrix = ExpertMatrix::kGateUp;
    at.first_row = part == "up_proj.weight" ? Im : 0;
    at.part_cols = H;
  } else if (part == "down_proj.weight") {
    at.shape = Shape{H, Im};
    at.matrix = m.experts_down;
    at.expert_matrix = ExpertMatrix::kDown;
    at.part_cols = Im;
  } else {
    return make_error("'" + name + "': no such expert tensor (gate_proj, up_proj, down_proj)");
  }
  at.part_rows = mine ? at.shape[0] : 0;
  return at;
}

Expected<WeightLocation> locate_layer(const BeamWeights& w, const ShardShape& s, int64_t layer,
                                      std::string_view suffix, const std::string& name) {
  const BeamConfig& c = w.config;
  if (layer < 0 || layer >= c.num_layers)
    return make_error("'" + name + "': layer " + std::to_string(layer) + " of a model of " +
                      std::to_string(c.num_layers));
  const LayerWeights& l = w.layers[static_cast<size_t>(layer)];
  const int64_t H = c.hidden_size, D = c.head_dim, qr = s.num_heads * D, kvr = s.num_kv_heads * D;
  const Shape q_shape{c.q_width(), H}, kv_shape{c.kv_width(), H};
  using S = WeightSplit;
  if (suffix == "input_layernorm.weight") return whole(l.input_norm, Shape{H}, S::kReplicated);
  if (suffix == "post_attention_layernorm.weight")
    return whole(l.post_attn_norm, Shape{H}, S::kReplicated);
  if (suffix == "pre_feedforward_layernorm.weight")
    return whole(l.pre_mlp_norm, Shape{H}, S::kReplicated);
  if (suffix == "post_feedforward_layernorm.weight")
    return whole(l.post_mlp_norm, Shape{H}, S::kReplicated);
  if (suffix == "self_attn.q_proj.weight") return rows_of(l.attn.qkvg, q_shape, S::kRows, 0, qr);
  if (suffix == "self_attn.k_proj.weight") return rows_of(l.attn.qkvg, kv_shape, S::kRows, qr, kvr);
  if (suffix == "self_attn.v_proj.weight")
    return rows_of(l.attn.qkvg, kv_shape, S::kRows, qr + kvr, kvr);
  if (suffix == "self_attn.gate_proj.weight")
    return rows_of(l.attn.qkvg, q_shape, S::kRows, qr + 2 * kvr, qr);
  if (suffix == "self_attn.gate_bias") return whole(l.attn.gate_bias, Shape{c.num_heads}, S::kRows);
  if (suffix == "self_attn.q_norm.weight") return whole(l.attn.q_norm, Shape{D}, S::kReplicated);
  if (suffix == "self_attn.k_norm.weight") return whole(l.attn.k_norm, Shape{D}, S::kReplicated);
  if (suffix == "self_attn.o_proj.weight")
    return whole(l.attn.o_proj, Shape{H, c.q_width()}, S::kColumns);
  if (c.mlp_layer_types[static_cast<size_t>(layer)] == MlpKind::kDense) {
    const int64_t I = c.intermediate_size, ir = s.intermediate;
    if (suffix == "mlp.gate_proj.weight") return rows_of(l.dense.gate_up, {I, H}, S::kRows, 0, ir);
    if (suffix == "mlp.up_proj.weight") return rows_of(l.dense.gate_up, {I, H}, S::kRows, ir, ir);
    if (suffix == "mlp.down_proj.weight") return whole(l.dense.down, Shape{H, I}, S::kColumns);
  } else {
    if (suffix == "mlp.gate.weight")
      return whole(l.moe.router, Shape{c.num_experts, H}, S::kReplicated);
    if (suffix == "mlp.gate.e_score_correction_bias")
      return whole(l.moe.router_bias, Shape{c.num_experts}, S::kReplicated);
    constexpr std::string_view kExperts = "mlp.experts.";
    if (suffix.starts_with(kExperts)) {
      if (auto e = leading_index(suffix.substr(kExperts.size())))
        return locate_expert(w, s, layer, e->first, e->second, name);
    }
  }
  return make_error("'" + name + "': layer " + std::to_string(layer) +
                    " has no such tensor (names: " + kForms + ")");
}

}  // namespace

Expected<WeightLocation> locate_weight(const BeamWeights& w, TensorParallel tp,
                                       const std::string& name) {
  const BeamConfig& c = w.config;
  const ShardShape s = shard_shape(c, tp);
  const Shape table{c.vocab_size, c.hidden_size};
  if (name == "model.embed_tokens.weight") return whole(w.embed, table, WeightSplit::kReplicated);
  if (name == "model.norm.weight")
    return whole(w.final_norm, Shape{c.hidden_size}, WeightSplit::kReplicated);
  if (name == "lm_head.weight") return whole(w.lm_head, table, WeightSplit::kRows);
  constexpr std::string_view kLayers = "model.layers.";
  if (std::string_view(name).starts_with(kLayers)) {
    if (auto l = leading_index(std::string_view(name).substr(kLayers.size())))
      return locate_layer(w, s, l->first, l->second, name);
  }
  return make_error("'" + name + "': no such tensor (names: " + kForms + ")");
}

Expected<WeightPart> read_weight_part(const KernelContext& ctx, const BeamWeights& w,
                                      TensorParallel tp, const std::string& name,
                                      int64_t max_rows) {
  BEAM_ASSIGN_OR_RETURN(const WeightLocation at, locate_weight(w, tp, name));
  WeightPart part;
  part.shape = at.shape;
  part.split = at.split;
  part.rows = max_rows < 0 ? at.part_rows : std::min(max_rows, at.part_rows);
  part.cols = at.part_cols;
  part.values.resize(static_cast<size_t>(part.rows * part.cols));
  if (part.rows == 0) return part;
  const size_t elem = dtype_size(at.matrix.dtype);
  std::vector<uint8_t> raw(part.values.size() * elem);
  if (at.expert >= 0) {
    read_expert_rows(ctx, at.expert_matrix, at.matrix, at.expert, at.first_row, part.rows,
                     reinterpret_cast<uint16_t*>(raw.data()));
  } else {
    const auto* src = static_cast<const char*>(at.matrix.data) + at.first_row * at.part_cols * elem;
    const int64_t n = static_cast<int64_t>(raw.size());
    copy_tensor(ctx, TensorView{raw.data(), DType::kU8, {n}, Device::kCpu},
                TensorView{const_cast<char*>(src), DType::kU8, {n}, at.matrix.device});
  }
  convert_elements(raw.data(), at.matrix.dtype, static_cast<int64_t>(part.values.size()),
                   part.values.data(), DType::kF32);
  return part;
}

WeightValues gather_weight(const std::vector<WeightPart>& ranks, int64_t max_rows) {
  BEAM_CHECK(!ranks.empty()) << "gather_weight: no parts";
  const WeightPart& first = ranks.front();
  const int64_t full_rows = first.shape[0];
  const int64_t rows = max_rows < 0 ? full_rows : std::min(max_rows, full_rows);
  const int64_t cols = first.shape.rank == 1 ? 1 : first.shape[1];
  WeightValues out;
  out.shape = first.shape;
  out.shape.dims[0] = rows;
  out.values.reserve(static_cast<size_t>(rows * cols));
  auto take_rows = [&](const WeightPart& p, int64_t n) {
    out.values.insert(out.values.end(), p.values.begin(), p.values.begin() + n * p.cols);
  };
  switch (first.split) {
    case WeightSplit::kReplicated:
      take_rows(first, rows);
      break;
    case WeightSplit::kRows:
      for (const WeightPart& p : ranks) {
        const int64_t left = rows - static_cast<int64_t>(out.values.size()) / cols;
        if (left <= 0) break;
        take_rows(p, std::min(left, p.rows));
      }
      break;
    case WeightSplit::kColumns:
      for (int64_t r = 0; r < rows; ++r)
        for (const WeightPart& p : ranks)
          out.values.insert(out.values.end(), p.values.begin() + r * p.cols,
                            p.values.begin() + (r + 1) * p.cols);
      break;
    case WeightSplit::kExpert:
      for (const WeightPart& p : ranks)
        if (p.rows > 0) take_rows(p, rows);
      break;
  }
  BEAM_CHECK(static_cast<int64_t>(out.values.size()) == rows * cols)
      << "gather_weight: " << out.values.size() << " values for " << out.shape.str();
  return out;
}

}  // namespace beam
