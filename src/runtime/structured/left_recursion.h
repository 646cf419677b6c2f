// Left recursion in GBNF rules (ebnf_syntax.h) rewritten as repetition before they are lowered,
// since the matcher's expansion could never finish it: direct (`expr ::= expr "+" term | term`
// becomes `expr ::= (term) ("+" term)*`, as Lark and xgrammar grammars write lists and
// operators) and through other rules (`a ::= b "x" | "y"`, `b ::= a "z" | "w"`: within each set
// of rules that reach one another as their first item, Paull's substitution in definition order,
// then the direct rewrite). Every rule keeps its language. Left recursion through something
// that can match nothing (`a ::= b? a "x"`) is left as it is: the lowering's termination check
// refuses it, naming the rule.
#pragma once

#include <vector>

#include "core/status.h"
#include "runtime/structured/ebnf_syntax.h"

namespace beam {

// Most expression nodes the rewrite may create for one grammar (substituting rules into one
// another multiplies their alternatives; past this the grammar is refused as too complex, naming
// the rule). The same bound as the parser's on a grammar's expressions.
inline constexpr size_t kMaxRewrittenNodes = 1000000;

// Rewrites rules' left recursion in place (rules refer to one another by name; undefined and
// duplicate names are left for the caller's checks).
Status eliminate_left_recursion(std::vector<EbnfRule>& rules);

}  // namespace beam
