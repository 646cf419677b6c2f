// One character of a grammar's string or class (GBNF, Lark): UTF-8 text or a backslash escape.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/status.h"

namespace beam {

// The character at text[at] — a UTF-8 sequence, or an escape: \n \r \t \f \v \a \b \0, \xHH,
// \uHHHH, \UHHHHHHHH (code points) or a backslash before punctuation — and `at` moved past it.
// An error (invalid UTF-8, an unknown escape, bad hex digits, a surrogate or a code point past
// U+10FFFF) leaves `at` at the problem. Needs at < text.size().
Expected<char32_t> read_literal_char(std::string_view text, size_t& at);

}  // namespace beam
