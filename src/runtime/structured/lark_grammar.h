// Lark grammars (vLLM's other `guided_grammar` syntax, OpenAI's `grammar` tool formats) as GBNF
// text for EbnfGrammar::compile: rules and terminals become GBNF rules, /regex/ terminals are
// parsed with the pattern syntax (regex_syntax.h) and written out as GBNF, `%import common.X`
// brings Lark's common terminals, and `%ignore X` lets X appear before every terminal of the
// rules and at the end. The text is matched as characters, not through Lark's lexer (no longest-
// match or priority rules between terminals). docs/structured_output.md ("Lark") has the subset.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace beam {

// The GBNF rule the translation starts from (its `start` rule, and the ignored text after it).
inline constexpr std::string_view kLarkRoot = "lark-root";

// Whether a grammar text is Lark rather than GBNF: it defines no `name ::=` rule (vLLM's test).
bool looks_like_lark(std::string_view text);

// GBNF text whose rule kLarkRoot matches what the Lark grammar's `start` matches; each Lark
// definition starts on its own line number, so GBNF errors point at the right line. An error
// names the construct and its line:column (templates, %declare / %override / %extend, imports
// other than `common`, regex flags other than `i`, a definition without a body, ...).
Expected<std::string> lark_to_gbnf(std::string_view lark);

}  // namespace beam
