// JavaScript string semantics over UTF-8 text, as the reference renderer (@huggingface/jinja)
// applies them: `\s` whitespace and trim, UTF-16 lengths and indices, case mapping, title case,
// code-unit ordering. Invalid UTF-8 bytes decode as U+FFFD, one byte each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace beam::text::jinja {

// Decodes the code point starting at `pos` and advances `pos` past it.
char32_t decode_utf8(std::string_view s, size_t& pos);

// JavaScript's WhiteSpace + LineTerminator set (what `\s` and String.prototype.trim use).
bool is_js_space(char32_t cp);
// Byte length of the JS whitespace code point starting at `pos`, or 0 when there is none.
size_t js_space_length_at(std::string_view s, size_t pos);

std::string_view js_trim(std::string_view s);
std::string_view js_trim_start(std::string_view s);
std::string_view js_trim_end(std::string_view s);

// String.prototype.length: UTF-16 code units.
size_t utf16_length(std::string_view s);
// The UTF-16 code unit at `index` (negative counts from the end, like Array.prototype.at) as
// UTF-8; a lone surrogate half becomes U+FFFD. False when out of range.
bool utf16_unit_at(std::string_view s, int64_t index, std::string& out);
// Byte offsets of the code point boundaries of `s`: starts of each code point, then s.size().
std::vector<size_t> code_point_offsets(std::string_view s);

std::string js_to_upper(std::string_view s);
std::string js_to_lower(std::string_view s);
// `/\b\w/g` upper-cased: ASCII word characters that follow a non-word character.
std::string js_title_case(std::string_view s);
// charAt(0).toUpperCase() + slice(1).
std::string js_capitalize(std::string_view s);

// Three-way comparison in UTF-16 code-unit order (JavaScript's `<` on strings).
int compare_utf16(std::string_view a, std::string_view b);

}  // namespace beam::text::jinja
