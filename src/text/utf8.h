// UTF-8 decoding with replacement exactly as the WHATWG Encoding standard (TextDecoder, fatal=false)
// defines it: every maximal invalid subpart becomes one U+FFFD. Streaming and one-shot forms.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace beam::text {

// Streaming decoder: feed bytes, get valid UTF-8 out. Bytes of a character that is not complete
// yet are held in the state; flush() turns such a held prefix into U+FFFD. One owner thread.
class Utf8Decoder {
 public:
  // Appends to `out` every character completed by `bytes` (U+FFFD for invalid sequences).
  void feed(std::string_view bytes, std::string& out);
  // Ends the stream: a held incomplete sequence becomes one U+FFFD.
  void flush(std::string& out);
  // True while bytes of an incomplete character are held.
  bool holding() const { return bytes_needed_ != 0; }

 private:
  uint32_t code_point_ = 0;
  int bytes_needed_ = 0;
  int bytes_seen_ = 0;
  uint8_t lower_ = 0x80;
  uint8_t upper_ = 0xBF;
};

// True if `bytes` is well-formed UTF-8 (no surrogates, no overlongs, ≤ U+10FFFF).
bool is_valid_utf8(std::string_view bytes);

// `bytes` with invalid sequences replaced by U+FFFD (WHATWG); a copy of `bytes` if already valid.
std::string to_valid_utf8(std::string_view bytes);

// Appends the UTF-8 encoding of `cp`; a value that is no Unicode scalar value (a surrogate or
// above U+10FFFF) appends U+FFFD.
void append_utf8(std::string& out, char32_t cp);

// Decodes the code point starting at `text[pos]` of VALID UTF-8 and advances `pos` past it.
char32_t next_code_point(std::string_view text, size_t& pos);

// Byte length of the UTF-8 sequence introduced by lead byte `lead` (1 for ASCII/continuations).
inline int utf8_sequence_length(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace beam::text
