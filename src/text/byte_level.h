// The GPT-2 ByteLevel alphabet: a bijection between the 256 byte values and 256 printable code
// points, used by byte-level BPE vocabularies ("Ġ" is the space byte 0x20).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace beam::text {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();

  // The code point that stands for `byte` in vocabulary strings.
  char32_t code_point(uint8_t byte) const { return byte_to_cp_[byte]; }
  // The byte a code point stands for, or nullopt if it is not in the alphabet.
  std::optional<uint8_t> byte(char32_t cp) const;

  // Raw bytes of a vocabulary string (valid UTF-8), or nullopt if a character is outside the
  // alphabet (such a token can never be produced from bytes).
  std::optional<std::string> to_bytes(std::string_view token) const;
  // The vocabulary spelling of raw bytes.
  std::string to_token(std::string_view bytes) const;

 private:
  std::array<char32_t, 256> byte_to_cp_{};
  std::array<int16_t, 324> cp_to_byte_{};  // every alphabet code point is < 324
};

}  // namespace beam::text
