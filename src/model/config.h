// BeamConfig: the validated numbers of a Beam-architecture model, read from config.json.
// Numbers only; key names and their aliases live in config.cpp (one table).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace beam {

enum class AttentionKind { kSliding, kFull };  // "sliding_attention" (RoPE + window), "full_attention" (NoPE + SSMax)
enum class MlpKind { kDense, kSparse };        // "dense" SwiGLU, "sparse" routed MoE

struct BeamConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;                 // H
  int64_t num_layers = 0;                  // L
  int64_t num_heads = 0;                   // Nq
  int64_t num_kv_heads = 0;                // Nkv
  int64_t head_dim = 0;                    // D
  int64_t intermediate_size = 0;           // dense SwiGLU width
  int64_t moe_intermediate_size = 0;       // per-expert width
  int64_t num_experts = 0;                 // E (n_routed_experts)
  int64_t num_experts_per_tok = 0;         // top-k
  int64_t num_groups = 1;                  // n_group
  int64_t topk_groups = 1;                 // topk_group
  float routed_scaling_factor = 1.0f;
  bool norm_topk_prob = true;
  float rms_norm_eps = 1e-6f;
  int64_t sliding_window = 0;              // W keys including the current one
  float rope_theta = 10000.0f;             // sliding layers only
  std::optional<float> final_logit_softcapping;  // absent = no softcap
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  std::vector<AttentionKind> layer_types;  // size L
  std::vector<MlpKind> mlp_layer_types;    // size L
  std::vector<int64_t> eos_token_ids;      // from config.json / generation_config.json when present
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::string torch_dtype;                 // "torch_dtype" / "dtype" as written ("" when absent)

  int64_t num_layers_of(MlpKind k) const;
  int64_t experts_per_group() const { return num_experts / num_groups; }
  int64_t q_width() const { return num_heads * head_dim; }
  int64_t kv_width() const { return num_kv_heads * head_dim; }
  int64_t num_layers_of(AttentionKind k) const;
  // Bytes of K and V per token for ONE layer (bf16 cache).
  int64_t kv_bytes_per_token_per_layer() const { return 2 * kv_width() * 2; }
  // Bytes of K and V per token summed over all layers of one attention kind.
  int64_t kv_bytes_per_token(AttentionKind k) const {
    return kv_bytes_per_token_per_layer() * num_layers_of(k);
  }
};

// The config.json spelling of a layer kind ("sliding_attention", "dense", ...).
std::string_view attention_kind_name(AttentionKind k);
std::string_view mlp_kind_name(MlpKind k);

// The config.json key of the first field in which a and b differ (the architecture a set of
// weights was made for); nullopt when they are the same.
std::optional<std::string_view> config_difference(const BeamConfig& a, const BeamConfig& b);

// Parses and validates config.json text; `source` names the file in error messages.
Expected<BeamConfig> parse_beam_config(const std::string& json_text, const std::string& source);
// Reads DIR/config.json (and DIR/generation_config.json for eos ids when present).
Expected<BeamConfig> load_beam_config(const std::string& model_dir);

}  // namespace beam
