// Tokens → syntax tree, following @huggingface/jinja's grammar and operator precedence (plus
// arguments for `is` tests, as Python Jinja allows). Errors name the offending token's offset.
#pragma once

#include <cstdint>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace beam::text::jinja {

// `end_offset` is reported when the template ends early (an unclosed block or tag).
// Fails with a kSyntax TemplateError.
Block parse(const std::vector<Token>& tokens, uint32_t end_offset);

}  // namespace beam::text::jinja
