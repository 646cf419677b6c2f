// DFlash2Config: the validated numbers of a DFlash2 drafter (docs/dflash2.md), read from its
// config.json and checked against the target it drafts for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace beam {

struct DFlash2Config {
  int64_t hidden_size = 0;        // H (the target's)
  int64_t num_layers = 0;         // drafter layers
  int64_t num_heads = 0;          // Nq
  int64_t num_kv_heads = 0;       // Nkv
  int64_t head_dim = 0;           // D
  int64_t intermediate_size = 0;  // SwiGLU width I
  int64_t vocab_size = 0;         // the target's
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  int64_t sliding_window = 0;             // context keys with q_pos - k_pos < window; 0: every one
  std::vector<int64_t> target_layer_ids;  // tapped target layers, the fc input's order
  int64_t block_size = 0;                 // the anchor and block_size - 1 drafts
  int32_t mask_token_id = 0;
  int64_t conv_group_size = 16;  // channels sharing one dynamic tap correction
  int64_t selector_rank = 0;     // R
  int64_t selector_top_k = 0;    // candidates per block position
  float output_multiplier = 1.0f;
  std::optional<float> final_logit_softcapping;

  int64_t num_taps() const { return static_cast<int64_t>(target_layer_ids.size()); }
  int64_t conv_groups() const { return hidden_size / conv_group_size; }
  int64_t max_drafts() const { return block_size - 1; }
};

// Parses DIR/config.json; errors name the file and the key. Checks the drafter against `target`:
// the same hidden size and vocabulary, tapped layers inside the target, ids inside the vocabulary.
Expected<DFlash2Config> load_dflash2_config(const std::string& dir, const BeamConfig& target);
// The same from config.json's text (`source` names it in errors).
Expected<DFlash2Config> parse_dflash2_config(const std::string& text, const std::string& source,
                                             const BeamConfig& target);

}  // namespace beam
