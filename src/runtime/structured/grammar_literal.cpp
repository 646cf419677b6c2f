#include "runtime/structured/grammar_literal.h"

#include <optional>
#include <string>
#include <utility>

#include "core/utf8_decode.h"
#include "runtime/structured/regex_syntax.h"

namespace beam {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Expected<char32_t> hex_escape(std::string_view text, size_t& at, int digits) {
  char32_t c = 0;
  for (int k = 0; k < digits; ++k, ++at) {
    const int v = at < text.size() ? hex_value(text[at]) : -1;
    if (v < 0) return make_error("expected " + std::to_string(digits) + " hex digits in an escape");
    c = c * 16 + static_cast<char32_t>(v);
  }
  if (c > kMaxCodePoint || (c >= 0xD800 && c <= 0xDFFF))
    return make_error("an escape of a surrogate or past U+10FFFF");
  return c;
}

Expected<char32_t> escape(std::string_view text, size_t& at) {
  if (at + 1 >= text.size()) return make_error("a backslash at the end of the text");
  constexpr std::pair<char, char32_t> kNamed[] = {{'n', U'\n'}, {'r', U'\r'}, {'t', U'\t'},
                                                  {'f', U'\f'}, {'v', U'\v'}, {'a', U'\a'},
                                                  {'b', U'\b'}, {'0', U'\0'}};
  const char e = text[at + 1];
  for (const auto& [name, c] : kNamed) {
    if (e != name) continue;
    at += 2;
    return c;
  }
  const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
  if (digits > 0) {
    at += 2;
    return hex_escape(text, at, digits);
  }
  const bool punctuation = (e >= '!' && e <= '/') || (e >= ':' && e <= '@') ||
                           (e >= '[' && e <= '`') || (e >= '{' && e <= '~');
  if (!punctuation) return make_error("unknown escape '\\" + std::string(1, e) + "'");
  at += 2;
  return static_cast<char32_t>(e);
}

}  // namespace

TextPosition text_position(std::string_view text, size_t at) {
  TextPosition p;
  for (size_t k = 0; k < at && k < text.size(); ++k) {
    if (text[k] == '\n') {
      ++p.line;
      p.column = 1;
    } else if ((static_cast<uint8_t>(text[k]) & 0xC0) != 0x80) {
      ++p.column;
    }
  }
  return p;
}

Expected<char32_t> read_literal_char(std::string_view text, size_t& at) {
  if (text[at] == '\\') return escape(text, at);
  if (const std::optional<char32_t> c = decode_utf8(text, at)) return *c;
  return make_error("invalid UTF-8");
}

}  // namespace beam
