// Base64 (RFC 4648, with padding) of raw bytes, e.g. routed expert ids as little-endian int32.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace beam {

std::string base64_encode(std::span<const uint8_t> bytes);

}  // namespace beam
