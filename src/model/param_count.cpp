// Parameter counting from BeamConfig (mirrors the tensor list of BEAM.md section 2).
#include "model/param_count.h"

namespace beam {

namespace {

template <typename N>
BasicParamCounts<N> count(const BeamConfig& c) {
  const N H = static_cast<N>(c.hidden_size), V = static_cast<N>(c.vocab_size);
  const N q = static_cast<N>(c.num_heads) * static_cast<N>(c.head_dim);
  const N kv = static_cast<N>(c.num_kv_heads) * static_cast<N>(c.head_dim);
  const N layers = static_cast<N>(c.num_layers);
  BasicParamCounts<N> p;
  p.embedding = V * H;
  p.lm_head = c.tie_word_embeddings ? N{} : V * H;
  const N attention_per_layer = q * H                             // q_proj
                                + 2 * kv * H                      // k_proj, v_proj
                                + q * H                           // output gate projection
                                + H * q                           // o_proj
                                + static_cast<N>(c.num_heads)     // gate bias
                                + 2 * static_cast<N>(c.head_dim);  // q_norm, k_norm
  p.attention = attention_per_layer * layers;
  p.norms = 4 * H * layers + H;
  const N dense_layers = static_cast<N>(c.num_layers_of(MlpKind::kDense));
  const N sparse_layers = static_cast<N>(c.num_layers_of(MlpKind::kSparse));
  const N experts = static_cast<N>(c.num_experts);
  p.dense_mlp = dense_layers * 3 * H * static_cast<N>(c.intermediate_size);
  p.routers = sparse_layers * (experts * H + experts);
  const N per_expert = 3 * H * static_cast<N>(c.moe_intermediate_size);
  p.experts_total = sparse_layers * experts * per_expert;
  p.experts_active = sparse_layers * static_cast<N>(c.num_experts_per_tok) * per_expert;
  return p;
}

}  // namespace

ParamCounts count_params(const BeamConfig& c) { return count<int64_t>(c); }

double approximate_total_params(const BeamConfig& c) { return count<double>(c).total(); }

WeightBytes weight_bytes(const BeamConfig& c) {
  ParamCounts p = count_params(c);
  WeightBytes b;
  b.f32_bytes = p.routers * 4;
  b.bf16_bytes = (p.total() - p.routers) * 2;
  return b;
}

}  // namespace beam
