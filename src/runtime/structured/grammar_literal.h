// One character of a grammar's string or class (GBNF, Lark): UTF-8 text or a backslash escape;
// and where an offset of a grammar's text is, for errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace beam {

// The character at text[at] — a UTF-8 sequence, or an escape: \n \r \t \f \v \a \b \0, \xHH,
// \uHHHH, \UHHHHHHHH (code points) or a backslash before punctuation — and `at` moved past it.
// An error (invalid UTF-8, an unknown escape, bad hex digits, a surrogate or a code point past
// U+10FFFF) leaves `at` at the problem. Needs at < text.size().
Expected<char32_t> read_literal_char(std::string_view text, size_t& at);

// The 1-based line and column (in code points) of byte offset `at` of `text`. Scans the text up
// to `at`: for error messages, not for every rule a parser meets.
struct TextPosition {
  int32_t line = 1, column = 1;
};
TextPosition text_position(std::string_view text, size_t at);

}  // namespace beam
