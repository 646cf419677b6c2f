// Strict UTF-8 decoding of one sequence, shared by the text layer's validator and the grammar and
// regex parsers (which must refuse what is not UTF-8 rather than decode it).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace beam {

// The code point of the well-formed UTF-8 sequence at text[at] (Unicode's Table 3-7: no
// overlongs, surrogates or values past U+10FFFF), advancing `at` past it; nullopt, `at`
// unchanged, for an ill-formed or truncated one. at < text.size().
std::optional<char32_t> decode_utf8(std::string_view text, size_t& at);

}  // namespace beam
