// Routed experts in responses (routing replay, SGLang's format): [positions, sparse layers,
// top_k] expert ids as little-endian int32, base64-encoded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api/api_error.h"
#include "server/api/json_fields.h"

namespace beam::server {

std::string encode_routed_experts(const std::vector<int32_t>& ids);

// The most host memory one request's routed experts may take (every choice, every position).
inline constexpr int64_t kMaxRoutedExpertsBytes = int64_t{1} << 30;

// A 400 naming return_routed_experts when `choices` sequences of up to `positions` positions
// would record more than kMaxRoutedExpertsBytes of int32 ids (sparse_layers x top_k a position).
ApiExpected<bool> check_routed_experts_size(int64_t choices, int64_t positions,
                                            int64_t sparse_layers, int64_t top_k);

// Sets choice["sgl_ext"]["routed_experts"] (where SGLang's completions and chat put them) when the
// request asked for them.
void add_routed_experts(const std::optional<std::vector<int32_t>>& ids, Json& choice);

}  // namespace beam::server
