#include "core/utf8_decode.h"

#include <cstdint>

namespace beam {

std::optional<char32_t> decode_utf8(std::string_view text, size_t& at) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[at + i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) {
    ++at;
    return lead;
  }
  // The length and the allowed range of the second byte for each lead byte (Table 3-7).
  int n = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  }
  if (n == 0 || at + static_cast<size_t>(n) > text.size()) return std::nullopt;
  if (byte(1) < lo || byte(1) > hi) return std::nullopt;
  char32_t cp = lead & (0x7F >> n);
  for (int i = 1; i < n; ++i) {
    const uint8_t c = byte(static_cast<size_t>(i));
    if ((c & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (c & 0x3F);
  }
  at += static_cast<size_t>(n);
  return cp;
}

}  // namespace beam
