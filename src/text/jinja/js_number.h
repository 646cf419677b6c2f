// JavaScript number semantics used by the reference renderer: Number.prototype.toString,
// toFixed(1) for whole floats, parseInt/parseFloat and the string-to-number conversion of `==`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace beam::text::jinja {

// Number.prototype.toString(): shortest round-trip digits, exponent form outside [1e-7, 1e21).
std::string js_number_to_string(double v);
// How the reference prints a float value: "-0.0", whole numbers with ".0", else toString().
std::string js_float_display(double v);
// parseInt(s, 10) and parseFloat(s); nullopt where JavaScript returns NaN.
std::optional<double> js_parse_int(std::string_view s);
std::optional<double> js_parse_float(std::string_view s);
// Number(s) as used by loose equality; NaN when the text is not a numeric literal.
double js_string_to_number(std::string_view s);
// True when v is finite and has no fractional part (Number.isInteger).
bool is_whole_number(double v);

}  // namespace beam::text::jinja
