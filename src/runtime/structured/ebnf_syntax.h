// GBNF text (llama.cpp's grammar format, which xgrammar, vLLM and SGLang read as EBNF) parsed into
// rules of expression trees over code point sets, for EbnfGrammar::compile (ebnf_grammar.h).
// docs/structured_output.md ("Grammars") gives the syntax.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/structured/regex_syntax.h"

namespace beam {

struct EbnfExpr {
  enum class Kind : uint8_t {
    kEmpty,      // the empty text ("" or an empty alternative)
    kSet,        // one code point of `set` (non-empty)
    kSequence,   // children in order
    kAlternate,  // any one child
    kRepeat,     // children[0] min..max times (max -1: unbounded)
    kRef,        // the rule `name`
    kDfa,        // text a prebuilt automaton matches whole (EbnfGrammar::compile_rules only)
  };
  Kind kind = Kind::kEmpty;
  std::vector<CodePointRange> set = {};  // kSet: sorted, disjoint, no surrogates
  std::vector<EbnfExpr> children = {};
  int32_t min = 0, max = -1;     // kRepeat
  std::string name = {};         // kRef
  size_t offset = 0;             // kRef: where it is written in the text (byte), for errors
  int32_t dfa = -1;              // kDfa: the index of its automaton
};

struct EbnfRule {
  std::string name;
  EbnfExpr body;
  size_t offset = 0;  // where the rule is defined in the text (byte)
};

// Most rules one grammar may define, and most groups nested in one rule (what recursive compiling
// meets as depth: a chain of rules or groups deeper than these could overflow a thread's stack).
inline constexpr int32_t kMaxGrammarRules = 2000;
inline constexpr int32_t kMaxGrammarNesting = 100;
// Most expression-tree depth summed over a grammar's rules (the deepest a path through rule
// references and their groups can go while compiling).
inline constexpr int64_t kMaxGrammarDepthSum = 50000;
// Most expressions (items, alternatives, a string's characters) one grammar text may hold: parsed
// trees cost ~200 bytes an expression, so a 32 MB body of literal alternatives would hold GBs.
inline constexpr int64_t kMaxGrammarExpressions = 1'000'000;

// The expression that matches exactly `text` (valid UTF-8, as every JSON string is): rules built
// in code (EbnfGrammar::compile_rules) write their literals with it.
EbnfExpr ebnf_text(std::string_view text);
// Expression builders for grammars made in code (structural tags, JSON schema rules): items in
// order, any one of `alts` (a single one as itself), x min..max times (max -1: unbounded), and a
// reference to the rule `name`.
EbnfExpr ebnf_seq(std::vector<EbnfExpr> items);
EbnfExpr ebnf_alt(std::vector<EbnfExpr> alts);
EbnfExpr ebnf_repeat(EbnfExpr x, int32_t min, int32_t max);
EbnfExpr ebnf_ref(std::string name);

// Rules in the text's order. An error names the problem and its line:column: an unexpected
// character, an unterminated string or class, an unknown escape, a class that matches no code
// point, a repetition past kMaxGrammarRepeat (ebnf_grammar.h) or with min > max, more than
// kMaxGrammarRules rules, groups nested past kMaxGrammarNesting or kMaxGrammarDepthSum, and text
// that defines no rule (with a hint when it looks like a Lark grammar).
Expected<std::vector<EbnfRule>> parse_ebnf(std::string_view text, int32_t max_repeat);

}  // namespace beam
