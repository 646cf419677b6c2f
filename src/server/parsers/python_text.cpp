// Python str/int/float/json semantics over UTF-8 (see python_text.h).
#include "server/parsers/python_text.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "server/parsers/bounded_json.h"

namespace beam::server {
namespace {

struct Decoded {
  char32_t code_point;
  size_t length;
  bool valid;
};

// Decodes the UTF-8 sequence at text[i]; an invalid or truncated sequence decodes as one byte.
Decoded decode_utf8(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) return {lead, 1, true};
  size_t length = 0;
  char32_t cp = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    cp = lead & 0x07;
  } else {
    return {0xFFFD, 1, false};
  }
  if (i + length > text.size()) return {0xFFFD, 1, false};
  for (size_t k = 1; k < length; ++k) {
    const auto byte = static_cast<unsigned char>(text[i + k]);
    if ((byte & 0xC0) != 0x80) return {0xFFFD, 1, false};
    cp = (cp << 6) | (byte & 0x3F);
  }
  return {cp, length, true};
}

// Digits with single underscores between them (Python's numeric literal rule), appended to
// `out` without underscores. Returns the index after the run; `start` when there is none.
size_t scan_digits(std::string_view s, size_t start, std::string* out) {
  size_t i = start;
  while (i < s.size()) {
    if (s[i] >= '0' && s[i] <= '9') {
      out->push_back(s[i]);
      ++i;
    } else if (s[i] == '_' && i > start && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') {
      ++i;
    } else {
      break;
    }
  }
  return i;
}

}  // namespace

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string_view py_strip(std::string_view text) {
  size_t first = text.size();
  size_t last_end = 0;
  for (size_t i = 0; i < text.size();) {
    const Decoded d = decode_utf8(text, i);
    const bool space = d.valid && py_isspace(d.code_point);
    if (!space) {
      if (first == text.size()) first = i;
      last_end = i + d.length;
    }
    i += d.length;
  }
  if (first == text.size()) return text.substr(0, 0);
  return text.substr(first, last_end - first);
}

size_t utf8_complete_prefix_bytes(std::string_view bytes) {
  const size_t n = bytes.size();
  size_t back = 0;
  while (back < 3 && back < n && (static_cast<unsigned char>(bytes[n - 1 - back]) & 0xC0) == 0x80) {
    ++back;
  }
  if (back == n) return n;
  const size_t lead_at = n - 1 - back;
  const auto lead = static_cast<unsigned char>(bytes[lead_at]);
  size_t need = 1;
  if ((lead & 0xE0) == 0xC0)
    need = 2;
  else if ((lead & 0xF0) == 0xE0)
    need = 3;
  else if ((lead & 0xF8) == 0xF0)
    need = 4;
  return back + 1 < need ? lead_at : n;
}

void append_valid_utf8(std::string* out, std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const Decoded d = decode_utf8(bytes, i);
    const char32_t cp = d.code_point;
    const bool canonical = d.length == 1 || (d.length == 2 && cp >= 0x80) ||
                           (d.length == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
                           (d.length == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
    if (d.valid && canonical) {
      out->append(bytes.substr(i, d.length));
      i += d.length;
    } else {
      out->append("\xEF\xBF\xBD");
      i += 1;
    }
  }
}

size_t utf8_length(std::string_view text) {
  size_t count = 0;
  for (size_t i = 0; i < text.size(); i += decode_utf8(text, i).length) ++count;
  return count;
}

std::optional<Json> py_int(std::string_view text) {
  std::string_view s = py_strip(text);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  std::string digits;
  if (scan_digits(s, 0, &digits) != s.size() || digits.empty()) return std::nullopt;
  uint64_t magnitude = 0;
  for (char c : digits) {
    const auto digit = static_cast<uint64_t>(c - '0');
    if (magnitude > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
    magnitude = magnitude * 10 + digit;
  }
  if (negative) {
    constexpr uint64_t kMinMagnitude = uint64_t{1} << 63;
    if (magnitude > kMinMagnitude) return std::nullopt;
    if (magnitude == kMinMagnitude) return Json(std::numeric_limits<int64_t>::min());
    return Json(-static_cast<int64_t>(magnitude));
  }
  if (magnitude <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Json(static_cast<int64_t>(magnitude));
  }
  return Json(magnitude);
}

std::optional<double> py_float(std::string_view text) {
  std::string_view s = py_strip(text);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  const std::string word = ascii_lower(s);
  const double sign = negative ? -1.0 : 1.0;
  if (word == "inf" || word == "infinity") return sign * std::numeric_limits<double>::infinity();
  if (word == "nan") return std::numeric_limits<double>::quiet_NaN();
  std::string clean;
  size_t i = scan_digits(s, 0, &clean);
  const bool int_digits = !clean.empty();
  bool frac_digits = false;
  if (i < s.size() && s[i] == '.') {
    clean.push_back('.');
    const size_t before = clean.size();
    i = scan_digits(s, i + 1, &clean);
    frac_digits = clean.size() > before;
  }
  if (!int_digits && !frac_digits) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    clean.push_back('e');
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean.push_back(s[i++]);
    const size_t before = clean.size();
    i = scan_digits(s, i, &clean);
    if (clean.size() == before) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  double value = 0.0;
  const auto [end, ec] = std::from_chars(clean.data(), clean.data() + clean.size(), value);
  if (ec == std::errc::result_out_of_range) {
    value = std::strtod(clean.c_str(), nullptr);  // overflow → inf, underflow → 0 as in Python
  } else if (ec != std::errc() || end != clean.data() + clean.size()) {
    return std::nullopt;
  }
  return negative ? -value : value;
}

std::optional<Json> py_json_loads(std::string_view text) {
  Expected<Json> value = parse_bounded_json(text);
  if (!value.ok()) return std::nullopt;
  return std::move(value).value();
}

bool py_truthy(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      return false;
    case Json::value_t::boolean:
      return value.get<bool>();
    case Json::value_t::number_integer:
      return value.get<int64_t>() != 0;
    case Json::value_t::number_unsigned:
      return value.get<uint64_t>() != 0;
    case Json::value_t::number_float:
      return value.get<double>() != 0.0;
    case Json::value_t::string:
      return !value.get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object:
    case Json::value_t::binary:
      return !value.empty();
  }
  return false;
}

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string py_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string json_text(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace beam::server
