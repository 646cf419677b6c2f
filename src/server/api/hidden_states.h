// Final hidden states in responses (SGLang's return_hidden_states): each position's final-norm
// output, the LM head's input, as bf16 rows of the model's hidden_size (TokenEvent::hidden_states).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "server/api/api_error.h"
#include "server/api/json_fields.h"

namespace beam::server {

// Rows of final hidden states: [rows, width] bf16 bits (width: the model's hidden_size).
struct HiddenStateRows {
  std::vector<uint16_t> bf16;
  int64_t width = 0;
  int64_t rows() const { return width > 0 ? static_cast<int64_t>(bf16.size()) / width : 0; }
  std::span<const uint16_t> row(int64_t r) const {
    return std::span(bf16).subspan(static_cast<size_t>(r * width), static_cast<size_t>(width));
  }
};

// The most host memory one request's hidden states may take (every choice, every position, bf16);
// their JSON numbers take about five times as much.
inline constexpr int64_t kMaxHiddenStatesBytes = int64_t{256} << 20;

// A 400 naming return_hidden_states when `choices` sequences of up to `positions` positions would
// record more than kMaxHiddenStatesBytes of `hidden_size`-wide bf16 rows.
ApiExpected<bool> check_hidden_states_size(int64_t choices, int64_t positions, int64_t hidden_size);

// beamserve's /generate: the rows' bf16 bits as little-endian bytes, base64.
std::string encode_hidden_states(const HiddenStateRows& states);

// SGLang's meta_info.hidden_states: the prompt's rows as one [prompt, width] list of lists (its
// first element), then one list per later position (each output token but the last).
Json sglang_hidden_states(const HiddenStateRows& states, int64_t prompt_tokens);

// SGLang's completions / chat choice field: choice["hidden_states"] = the last row (the state
// that gave the choice's last token; [] with no rows), when the request asked for them.
void add_last_hidden_state(const std::optional<HiddenStateRows>& states, Json& choice);

}  // namespace beam::server
