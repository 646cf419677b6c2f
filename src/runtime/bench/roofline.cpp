// Byte and FLOP counts behind the benchmark floors (see roofline.h for what is counted).
#include "runtime/bench/roofline.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace beam {
namespace {

constexpr double kBf16 = 2, kF32 = 4;

}  // namespace

Cost attention_cost(const BeamConfig& c, const AttentionWork& w) {
  const double H = static_cast<double>(c.hidden_size), q = static_cast<double>(c.q_width());
  const double kv = static_cast<double>(c.kv_width()), D = static_cast<double>(c.head_dim);
  const double params = (2 * q + 2 * kv) * H + H * q;             // qkvg + o_proj
  const double small = static_cast<double>(c.num_heads) + 2 * D;  // gate bias, q/k norms
  const double kv_row = static_cast<double>(c.kv_bytes_per_token_per_layer());
  Cost cost;
  cost.bytes =
      (params + small) * kBf16 + kv_row * static_cast<double>(w.kv_tokens_read + w.num_tokens);
  cost.flops = 2 * static_cast<double>(w.num_tokens) * params +
               4 * static_cast<double>(c.num_heads) * D * static_cast<double>(w.keys_attended);
  return cost;
}

Cost dense_mlp_cost(const BeamConfig& c, int64_t num_tokens) {
  const double params =
      3 * static_cast<double>(c.hidden_size) * static_cast<double>(c.intermediate_size);
  return {params * kBf16, 2 * static_cast<double>(num_tokens) * params};
}

Cost moe_cost(const BeamConfig& c, int64_t num_tokens, int64_t experts_touched) {
  const double H = static_cast<double>(c.hidden_size), E = static_cast<double>(c.num_experts);
  const double expert = 3 * H * static_cast<double>(c.moe_intermediate_size);
  const double T = static_cast<double>(num_tokens);
  Cost cost;
  cost.bytes = E * H * kF32 + E * kF32 + static_cast<double>(experts_touched) * expert * kBf16;
  cost.flops = 2 * T * E * H + 2 * T * static_cast<double>(c.num_experts_per_tok) * expert;
  return cost;
}

Cost lm_head_cost(const BeamConfig& c, int64_t rows) {
  const double H = static_cast<double>(c.hidden_size), V = static_cast<double>(c.vocab_size);
  const double R = static_cast<double>(rows);
  return {V * H * kBf16 + H * kBf16 + R * V * (kBf16 + kF32), 2 * R * V * H};
}

int64_t keys_seen(const BeamConfig& c, AttentionKind k, int64_t position) {
  switch (k) {
    case AttentionKind::kSliding:
      return std::min(position + 1, c.sliding_window);
    case AttentionKind::kFull:
      return position + 1;
  }
  return 0;
}

int64_t keys_seen_sum(const BeamConfig& c, AttentionKind k, int64_t first, int64_t count) {
  int64_t sum = 0;
  for (int64_t p = first; p < first + count; ++p) sum += keys_seen(c, k, p);
  return sum;
}

double expected_experts_touched(const BeamConfig& c, int64_t num_tokens) {
  const double E = static_cast<double>(c.num_experts),
               k = static_cast<double>(c.num_experts_per_tok);
  return E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(num_tokens)));
}

ExpertLoad expert_load(const std::vector<int32_t>& routed, int64_t num_layers) {
  ExpertLoad load;
  if (num_layers == 0) return load;
  const size_t per_layer = routed.size() / static_cast<size_t>(num_layers);
  for (int64_t l = 0; l < num_layers; ++l) {
    std::map<int32_t, int64_t> rows;
    for (size_t i = 0; i < per_layer; ++i) ++rows[routed[static_cast<size_t>(l) * per_layer + i]];
    int64_t most = 0;
    for (const auto& [expert, n] : rows) most = std::max(most, n);
    load.touched.push_back(static_cast<int64_t>(rows.size()));
    load.max_rows.push_back(most);
  }
  return load;
}

}  // namespace beam
