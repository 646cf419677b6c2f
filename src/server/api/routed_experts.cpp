#include "server/api/routed_experts.h"

#include <algorithm>
#include <bit>

#include "core/base64.h"

namespace beam::server {

std::string encode_routed_experts(const std::vector<int32_t>& ids) {
  std::vector<uint32_t> words(ids.size());
  std::transform(ids.begin(), ids.end(), words.begin(),
                 [](int32_t id) { return std::bit_cast<uint32_t>(id); });
  return base64_encode_le32(words);
}

ApiExpected<bool> check_routed_experts_size(int64_t choices, int64_t positions,
                                            int64_t sparse_layers, int64_t top_k) {
  const double bytes = static_cast<double>(choices) * static_cast<double>(positions) *
                       static_cast<double>(sparse_layers * top_k) * 4.0;
  if (bytes <= static_cast<double>(kMaxRoutedExpertsBytes)) return true;
  return invalid_request(
      "'return_routed_experts': " + std::to_string(choices) + " choice(s) of up to " +
          std::to_string(positions) + " positions would hold " +
          std::to_string(static_cast<int64_t>(bytes / (1 << 20))) +
          " MiB of expert ids, over the " + std::to_string(kMaxRoutedExpertsBytes >> 20) +
          " MiB a request may; lower max_tokens or n",
      "return_routed_experts");
}

void add_routed_experts(const std::optional<std::vector<int32_t>>& ids, Json& choice) {
  if (ids) choice["sgl_ext"]["routed_experts"] = encode_routed_experts(*ids);
}

}  // namespace beam::server
