// JavaScript string semantics over UTF-8 text (see js_string.h).
#include "text/jinja/js_string.h"

#include <utf8proc.h>

#include "text/utf8.h"

namespace beam::text::jinja {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool is_ascii_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// First UTF-16 code unit of a code point (the high surrogate for astral ones).
uint32_t first_utf16_unit(char32_t cp) {
  return cp < 0x10000 ? static_cast<uint32_t>(cp) : 0xD800 + ((cp - 0x10000) >> 10);
}

template <typename MapFn>
std::string map_code_points(std::string_view s, MapFn map) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) map(out, decode_utf8(s, pos));
  return out;
}

}  // namespace

char32_t decode_utf8(std::string_view s, size_t& pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char b0 = byte(pos);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  int len = b0 >= 0xF0 && b0 <= 0xF4 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (len == 0 || pos + len > s.size()) {
    ++pos;
    return kReplacement;
  }
  char32_t cp = b0 & (0x7F >> len);
  for (int i = 1; i < len; ++i) {
    unsigned char b = byte(pos + i);
    if ((b & 0xC0) != 0x80) {
      ++pos;
      return kReplacement;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++pos;
    return kReplacement;
  }
  pos += len;
  return cp;
}

bool is_js_space(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

size_t js_space_length_at(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  size_t next = pos;
  char32_t cp = decode_utf8(s, next);
  return is_js_space(cp) ? next - pos : 0;
}

std::string_view js_trim_start(std::string_view s) {
  size_t pos = 0;
  while (size_t n = js_space_length_at(s, pos)) pos += n;
  return s.substr(pos);
}

std::string_view js_trim_end(std::string_view s) {
  // Walk forward so multi-byte whitespace is recognised; remember where the last run began.
  size_t pos = 0, end = 0;
  while (pos < s.size()) {
    size_t next = pos;
    char32_t cp = decode_utf8(s, next);
    if (!is_js_space(cp)) end = next;
    pos = next;
  }
  return s.substr(0, end);
}

std::string_view js_trim(std::string_view s) { return js_trim_end(js_trim_start(s)); }

size_t utf16_length(std::string_view s) {
  size_t n = 0, pos = 0;
  while (pos < s.size()) n += decode_utf8(s, pos) >= 0x10000 ? 2 : 1;
  return n;
}

bool utf16_unit_at(std::string_view s, int64_t index, std::string& out) {
  int64_t length = static_cast<int64_t>(utf16_length(s));
  if (index < 0) index += length;
  if (index < 0 || index >= length) return false;
  int64_t unit = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = decode_utf8(s, pos);
    int64_t width = cp >= 0x10000 ? 2 : 1;
    if (index < unit + width) {
      out.clear();
      append_utf8(out, width == 2 ? kReplacement : cp);
      return true;
    }
    unit += width;
  }
  return false;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  size_t pos = 0;
  while (pos < s.size()) {
    offsets.push_back(pos);
    decode_utf8(s, pos);
  }
  offsets.push_back(s.size());
  return offsets;
}

std::string js_to_upper(std::string_view s) {
  return map_code_points(s, [](std::string& out, char32_t cp) {
    if (cp == 0xDF) {  // ß → SS, the one SpecialCasing entry common in real text
      out += "SS";
      return;
    }
    append_utf8(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))));
  });
}

std::string js_to_lower(std::string_view s) {
  return map_code_points(s, [](std::string& out, char32_t cp) {
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  });
}

std::string js_title_case(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    bool at_boundary = i == 0 || !is_ascii_word(out[i - 1]);
    if (at_boundary && out[i] >= 'a' && out[i] <= 'z') out[i] = static_cast<char>(out[i] - 'a' + 'A');
  }
  return out;
}

std::string js_capitalize(std::string_view s) {
  if (s.empty()) return std::string();
  size_t pos = 0;
  char32_t cp = decode_utf8(s, pos);
  if (cp >= 0x10000) return std::string(s);  // charAt(0) is a lone surrogate: unchanged
  return js_to_upper(s.substr(0, pos)) + std::string(s.substr(pos));
}

int compare_utf16(std::string_view a, std::string_view b) {
  size_t pa = 0, pb = 0;
  while (pa < a.size() && pb < b.size()) {
    char32_t ca = decode_utf8(a, pa), cb = decode_utf8(b, pb);
    if (ca == cb) continue;
    uint32_t ua = first_utf16_unit(ca), ub = first_utf16_unit(cb);
    if (ua != ub) return ua < ub ? -1 : 1;
    return ca < cb ? -1 : 1;
  }
  if (pa < a.size()) return 1;
  if (pb < b.size()) return -1;
  return 0;
}

}  // namespace beam::text::jinja
