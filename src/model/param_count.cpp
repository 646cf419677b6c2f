// Parameter counting from BeamConfig (mirrors the tensor list of BEAM.md section 2).
#include "model/param_count.h"

namespace beam {

ParamCounts count_params(const BeamConfig& c) {
  const int64_t H = c.hidden_size, V = c.vocab_size;
  ParamCounts p;
  p.embedding = V * H;
  p.lm_head = c.tie_word_embeddings ? 0 : V * H;
  const int64_t attention_per_layer = c.q_width() * H        // q_proj
                                      + 2 * c.kv_width() * H  // k_proj, v_proj
                                      + c.q_width() * H       // output gate projection
                                      + H * c.q_width()       // o_proj
                                      + c.num_heads           // gate bias
                                      + 2 * c.head_dim;       // q_norm, k_norm
  p.attention = attention_per_layer * c.num_layers;
  p.norms = 4 * H * c.num_layers + H;
  const int64_t dense_layers = c.num_layers_of(MlpKind::kDense);
  const int64_t sparse_layers = c.num_layers_of(MlpKind::kSparse);
  p.dense_mlp = dense_layers * 3 * H * c.intermediate_size;
  p.routers = sparse_layers * (c.num_experts * H + c.num_experts);
  const int64_t per_expert = 3 * H * c.moe_intermediate_size;
  p.experts_total = sparse_layers * c.num_experts * per_expert;
  p.experts_active = sparse_layers * c.num_experts_per_tok * per_expert;
  return p;
}

WeightBytes weight_bytes(const BeamConfig& c) {
  ParamCounts p = count_params(c);
  WeightBytes b;
  b.f32_bytes = p.routers * 4;
  b.bf16_bytes = (p.total() - p.routers) * 2;
  return b;
}

}  // namespace beam
