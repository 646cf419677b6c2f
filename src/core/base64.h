// Base64 (RFC 4648, with padding) of raw bytes, e.g. routed expert ids as little-endian int32.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace beam {

std::string base64_encode(std::span<const uint8_t> bytes);
// base64_encode of the words' little-endian bytes (int32 expert ids, float32 vectors as bits).
std::string base64_encode_le32(std::span<const uint32_t> words);

}  // namespace beam
