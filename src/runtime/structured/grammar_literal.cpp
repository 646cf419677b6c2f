#include "runtime/structured/grammar_literal.h"

#include <string>
#include <utility>

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
  const auto b = static_cast<uint8_t>(text[at]);
  if (b == '\\') return escape(text, at);
  if (b < 0x80) {
    ++at;
    return static_cast<char32_t>(b);
  }
  const int n = b >= 0xF8 ? 0 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
  if (n == 0 || at + static_cast<size_t>(n) > text.size()) return make_error("invalid UTF-8");
  char32_t c = b & (0xFF >> (n + 1));
  for (int k = 1; k < n; ++k) {
    const auto cont = static_cast<uint8_t>(text[at + static_cast<size_t>(k)]);
    if ((cont & 0xC0) != 0x80) return make_error("invalid UTF-8");
    c = (c << 6) | (cont & 0x3F);
  }
  at += static_cast<size_t>(n);
  return c;
}

}  // namespace beam
