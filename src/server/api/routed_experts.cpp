#include "server/api/routed_experts.h"

#include <bit>

#include "core/base64.h"

namespace beam::server {

std::string encode_routed_experts(const std::vector<int32_t>& ids) {
  std::vector<uint8_t> bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    const auto v = std::bit_cast<uint32_t>(id);
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(static_cast<uint8_t>(v >> shift));
  }
  return base64_encode(bytes);
}

void add_routed_experts(const std::optional<std::vector<int32_t>>& ids, Json& choice) {
  if (ids) choice["sgl_ext"]["routed_experts"] = encode_routed_experts(*ids);
}

}  // namespace beam::server
