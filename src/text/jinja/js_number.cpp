// JavaScript number formatting and parsing (see js_number.h).
#include "text/jinja/js_number.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "text/jinja/js_string.h"

namespace beam::text::jinja {
namespace {

bool is_decimal_digit(char c) {
  return c >= '0' && c <= '9';
}

size_t digits_at(std::string_view s, size_t pos) {
  size_t n = 0;
  while (pos + n < s.size() && is_decimal_digit(s[pos + n])) ++n;
  return n;
}

// Length of the longest StrDecimalLiteral prefix of `s` (sign included), 0 when none.
size_t decimal_literal_length(std::string_view s) {
  size_t pos = 0;
  if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) ++pos;
  if (s.substr(pos, 8) == "Infinity") return pos + 8;
  size_t int_digits = digits_at(s, pos);
  pos += int_digits;
  size_t frac_digits = 0;
  if (pos < s.size() && s[pos] == '.') {
    frac_digits = digits_at(s, pos + 1);
    if (int_digits > 0 || frac_digits > 0) pos += 1 + frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return 0;
  if (pos < s.size() && (s[pos] == 'e' || s[pos] == 'E')) {
    size_t exp = pos + 1;
    if (exp < s.size() && (s[exp] == '+' || s[exp] == '-')) ++exp;
    size_t exp_digits = digits_at(s, exp);
    if (exp_digits > 0) pos = exp + exp_digits;
  }
  return pos;
}

// Converts a StrDecimalLiteral (as accepted above) to a double, correctly rounded.
double parse_decimal_literal(std::string_view literal) {
  bool negative = !literal.empty() && literal[0] == '-';
  if (!literal.empty() && (literal[0] == '-' || literal[0] == '+')) literal.remove_prefix(1);
  double v = 0;
  if (literal == "Infinity") {
    v = std::numeric_limits<double>::infinity();
  } else {
    std::string text(literal);
    if (!text.empty() && text.back() == '.') text.pop_back();  // "5." is valid in JavaScript
    if (!text.empty() && text[0] == '.') text.insert(text.begin(), '0');
    v = std::strtod(text.c_str(), nullptr);  // the C locale: '.' is the decimal point
  }
  return negative ? -v : v;
}

}  // namespace

bool is_whole_number(double v) { return std::isfinite(v) && std::floor(v) == v; }

std::string js_number_to_string(double v) {
  if (std::isnan(v)) return "NaN";
  if (v == 0) return "0";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  if (v < 0) return "-" + js_number_to_string(-v);
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  int k = static_cast<int>(digits.size());
  int n = exponent + 1;
  if (k <= n && n <= 21) return digits + std::string(static_cast<size_t>(n - k), '0');
  if (0 < n && n <= 21) return digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  if (-6 < n && n <= 0) return "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  std::string exp = (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  if (k == 1) return digits + exp;
  return digits.substr(0, 1) + "." + digits.substr(1) + exp;
}

std::string js_float_display(double v) {
  if (v == 0 && std::signbit(v)) return "-0.0";
  if (!is_whole_number(v)) return js_number_to_string(v);
  if (std::fabs(v) >= 1e21) return js_number_to_string(v);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::optional<double> js_parse_int(std::string_view s) {
  s = js_trim_start(s);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  size_t n = digits_at(s, 0);
  if (n == 0) return std::nullopt;
  double v = std::strtod(std::string(s.substr(0, n)).c_str(), nullptr);
  return negative ? -v : v;
}

std::optional<double> js_parse_float(std::string_view s) {
  s = js_trim_start(s);
  size_t n = decimal_literal_length(s);
  if (n == 0) return std::nullopt;
  return parse_decimal_literal(s.substr(0, n));
}

double js_string_to_number(std::string_view s) {
  s = js_trim(s);
  if (s.empty()) return 0;
  if (s.size() > 2 && s[0] == '0') {
    int radix = s[1] == 'x' || s[1] == 'X' ? 16 : s[1] == 'o' || s[1] == 'O' ? 8 : s[1] == 'b' || s[1] == 'B' ? 2 : 0;
    if (radix != 0) {
      double v = 0;
      for (char c : s.substr(2)) {
        int d = is_decimal_digit(c)      ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : 99;
        if (d >= radix) return std::numeric_limits<double>::quiet_NaN();
        v = v * radix + d;
      }
      return v;
    }
  }
  if (decimal_literal_length(s) != s.size()) return std::numeric_limits<double>::quiet_NaN();
  return parse_decimal_literal(s);
}

}  // namespace beam::text::jinja
