// Python `str` semantics that the response_template format inherits from transformers: strip(),
// int(), float(), json.loads() and truthiness, over UTF-8 text, so parsed values match Python's.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace beam::server {

using Json = nlohmann::ordered_json;  // keeps object keys in insertion order, like a Python dict

// Python's str.isspace() for one code point.
bool py_isspace(char32_t code_point);

// Python's str.strip() with no argument: removes leading and trailing Unicode whitespace.
std::string_view py_strip(std::string_view text);

// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence (an
// incomplete multi-byte sequence at the very end is excluded; invalid bytes count as complete).
size_t utf8_complete_prefix_bytes(std::string_view bytes);

// Appends `bytes` to `out` with every byte that is not part of a valid UTF-8 sequence (RFC 3629:
// no overlongs, surrogates or values above U+10FFFF) replaced by U+FFFD.
void append_valid_utf8(std::string* out, std::string_view bytes);

// Number of code points (Python len()) of UTF-8 text; an invalid byte counts as one.
size_t utf8_length(std::string_view text);

// Python int(text) in base 10: surrounding whitespace, sign, '_' between digits. Returns an
// integer JSON value, or nullopt when Python would raise or the value does not fit 64 bits
// (Python has unbounded ints; documented deviation). ASCII digits only.
std::optional<Json> py_int(std::string_view text);

// Python float(text): whitespace, sign, digits with '_', '.', exponent, inf/infinity/nan.
std::optional<double> py_float(std::string_view text);

// Python json.loads(text): a value, or nullopt on a decode error. NaN/Infinity literals and
// integers beyond 64 bits are not accepted (documented deviation), nor text past
// parse_bounded_json's nesting and key limits.
std::optional<Json> py_json_loads(std::string_view text);

// Python bool(value) for a JSON value (None, False, 0, "", [], {} are false).
bool py_truthy(const Json& value);

// ASCII-lowercased copy (enough for comparisons against ASCII literals like "true").
std::string ascii_lower(std::string_view text);

// Python repr()-like quoting for error messages: 'text' with control characters escaped.
std::string py_quote(std::string_view text);

// A JSON value rendered for messages; never throws on invalid UTF-8.
std::string json_text(const Json& value);

}  // namespace beam::server
