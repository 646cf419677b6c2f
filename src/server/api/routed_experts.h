// Routed experts in responses (routing replay, SGLang's format): [positions, sparse layers,
// top_k] expert ids as little-endian int32, base64-encoded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api/json_fields.h"

namespace beam::server {

std::string encode_routed_experts(const std::vector<int32_t>& ids);

// Sets choice["sgl_ext"]["routed_experts"] (where SGLang's completions and chat put them) when the
// request asked for them.
void add_routed_experts(const std::optional<std::vector<int32_t>>& ids, Json& choice);

}  // namespace beam::server
