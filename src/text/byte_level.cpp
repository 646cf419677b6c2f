// ByteLevel alphabet tables (GPT-2 bytes_to_unicode).
#include "text/byte_level.h"

#include "text/utf8.h"

namespace beam::text {

ByteLevelAlphabet::ByteLevelAlphabet() {
  cp_to_byte_.fill(-1);
  // Printable bytes map to themselves; the rest, in byte order, to 256, 257, ...
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const int cp = printable ? b : next++;
    byte_to_cp_[b] = static_cast<char32_t>(cp);
    cp_to_byte_[cp] = static_cast<int16_t>(b);
  }
}

std::optional<uint8_t> ByteLevelAlphabet::byte(char32_t cp) const {
  if (cp >= cp_to_byte_.size() || cp_to_byte_[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(cp_to_byte_[cp]);
}

std::optional<std::string> ByteLevelAlphabet::to_bytes(std::string_view token) const {
  std::string out;
  out.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    auto b = byte(next_code_point(token, pos));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

std::string ByteLevelAlphabet::to_token(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_cp_[static_cast<uint8_t>(c)]);
  return out;
}

}  // namespace beam::text
