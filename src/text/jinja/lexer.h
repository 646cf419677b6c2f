// Template text → tokens, exactly as @huggingface/jinja tokenizes chat templates: the same
// preprocessing (one trailing newline dropped, lstrip_blocks and trim_blocks on, the transformers
// {% generation %} tag removed), whitespace control ({%- -%} {{- -}} {#- -#}), string escapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace beam::text::jinja {

enum class TokenType {
  kText,
  kNumericLiteral,
  kStringLiteral,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,    // {%
  kCloseStatement,   // %}
  kOpenExpression,   // {{
  kCloseExpression,  // }}
  kOpenSquareBracket,
  kCloseSquareBracket,
  kOpenCurlyBracket,
  kCloseCurlyBracket,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditiveOperator,        // + - ~
  kMultiplicativeOperator,  // * / // %
  kExponentiationOperator,  // **
  kComparisonOperator,      // < > <= >= == !=
  kUnaryOperator,           // a sign not followed by a number
  kComment,
};

const char* token_type_name(TokenType type);

struct Token {
  TokenType type;
  std::string value;  // literal text; string literals with escapes resolved
  uint32_t offset;    // byte offset of the token in the original template source
};

// Fails with a kSyntax TemplateError naming the offset of the offending character.
std::vector<Token> tokenize(std::string_view source);

}  // namespace beam::text::jinja
