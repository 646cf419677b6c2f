// Translates the Oniguruma patterns of tokenizer.json (what the Rust tokenizers library compiles)
// into PCRE2 syntax with the same meaning, mirroring the official JS port's translation where
// the two engines differ (\s, \w, \h, \b, ^, $, ., (?i:...) ASCII folding, {n,m}+ stacking).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace beam::text {

// Returns the PCRE2 pattern (for PCRE2_UTF | PCRE2_UCP) or an error naming the construct and its
// byte offset when the pattern uses Oniguruma syntax that is not supported.
Expected<std::string> translate_oniguruma_pattern(std::string_view pattern);

}  // namespace beam::text
