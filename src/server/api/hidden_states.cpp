#include "server/api/hidden_states.h"

#include <algorithm>

#include "core/base64.h"
#include "core/bf16.h"

namespace beam::server {
namespace {

Json row_json(std::span<const uint16_t> row) {
  Json out = Json::array();
  for (uint16_t bits : row) out.push_back(to_float(bf16{bits}));
  return out;
}

}  // namespace

ApiExpected<bool> check_hidden_states_size(int64_t choices, int64_t positions,
                                           int64_t hidden_size) {
  const double bytes = static_cast<double>(choices) * static_cast<double>(positions) *
                       static_cast<double>(hidden_size) * 2.0;
  if (bytes <= static_cast<double>(kMaxHiddenStatesBytes)) return true;
  return invalid_request(
      "'return_hidden_states': " + std::to_string(choices) + " choice(s) of up to " +
          std::to_string(positions) + " positions would hold " +
          std::to_string(static_cast<int64_t>(bytes / (1 << 20))) +
          " MiB of hidden states, over the " + std::to_string(kMaxHiddenStatesBytes >> 20) +
          " MiB a request may; lower max_tokens or n",
      "return_hidden_states");
}

std::string encode_hidden_states(const HiddenStateRows& states) {
  std::vector<uint8_t> bytes;
  bytes.reserve(states.bf16.size() * 2);
  for (uint16_t v : states.bf16) {
    bytes.push_back(static_cast<uint8_t>(v));
    bytes.push_back(static_cast<uint8_t>(v >> 8));
  }
  return base64_encode(bytes);
}

Json sglang_hidden_states(const HiddenStateRows& states, int64_t prompt_tokens) {
  const int64_t rows = states.rows(), prompt = std::clamp<int64_t>(prompt_tokens, 0, rows);
  Json prompt_rows = Json::array();
  for (int64_t r = 0; r < prompt; ++r) prompt_rows.push_back(row_json(states.row(r)));
  Json out = Json::array({std::move(prompt_rows)});
  for (int64_t r = prompt; r < rows; ++r) out.push_back(row_json(states.row(r)));
  return out;
}

void add_last_hidden_state(const std::optional<HiddenStateRows>& states, Json& choice) {
  if (!states) return;
  choice["hidden_states"] =
      states->rows() > 0 ? row_json(states->row(states->rows() - 1)) : Json::array();
}

}  // namespace beam::server
