// EbnfGrammar: a context-free grammar the whole output must match, written in GBNF (the EBNF of
// llama.cpp and xgrammar that vLLM's `guided_grammar` and SGLang's `ebnf` take), compiled for
// EbnfMatcher (ebnf_matcher.h). Every rule that cannot reach itself is regular: it and each run
// of regular items inside a recursive rule become one ByteDfa terminal (a lexer's token), so only
// the recursive skeleton is matched with stacks. Immutable once compiled.
// docs/structured_output.md ("Grammars") gives the syntax and the limits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/structured/byte_dfa.h"
#include "runtime/structured/ebnf_syntax.h"

namespace beam {

// Most elements (terminals, rule references, ends) of a compiled grammar.
inline constexpr int32_t kMaxGrammarElements = 1 << 20;
// Most repetitions a quantifier may ask for ({m,n}: m, n <= this).
inline constexpr int32_t kMaxGrammarRepeat = 10000;
// Most bytes of terminal automata one grammar may build (a terminal past ByteDfa's limits counts
// a sixteenth for the attempt): bounds a grammar's compile time and memory (PRIOR-ART pain
// point 7).
inline constexpr size_t kMaxGrammarTerminalBytes = size_t{64} << 20;
// What a terminal costs besides its table (the automaton's object, byte classes, its state
// lists: ~2.3 KB measured), counted against kMaxGrammarTerminalBytes.
inline constexpr size_t kTerminalFixedBytes = 2048;

// One item of a lowered alternative.
struct GrammarElement {
  enum class Kind : uint8_t {
    kTerminal,  // text dfas[arg] matches whole (its state rides in the stack's top frame)
    kRule,      // a reference to rules[arg]
    kEnd,       // the end of an alternative: return to the caller
  };
  Kind kind = Kind::kEnd;
  int32_t arg = 0;
};

struct GrammarRule {
  std::string name;                 // the GBNF name, or "<name>/<n>" for a group or repetition
  std::vector<int32_t> alternatives;  // the element index each alternative starts at
};

// An error once `automata` (compile_rules' prebuilt terminals) pass kMaxGrammarTerminalBytes:
// code that builds them checks as it goes, so a hostile input stops before it holds more.
Status check_automata_bytes(const std::vector<std::shared_ptr<const ByteDfa>>& automata);

// Rules read from GBNF (or Lark) text, their names checked as compile() checks them, not
// lowered: a structural tag embeds them in its own grammar, which compiles once.
struct ParsedGrammar {
  std::vector<EbnfRule> rules;
  std::string root;  // the start rule's name
};

class EbnfGrammar {
 public:
  // Compiles GBNF text whose start rule is `root`. An error names the problem and where it is
  // (line:column, or the rule): a syntax error, an undefined or duplicate rule, no root rule, a
  // left-recursive rule (one that can reach itself before consuming text), a rule that can never
  // finish, a character class that matches nothing, or a grammar past the size limits.
  static Expected<std::shared_ptr<const EbnfGrammar>> compile(std::string_view text,
                                                              std::string_view root = "root");
  // GBNF from `root`, or a Lark grammar from `start` when the text defines no `name ::=` rule
  // (vLLM's test; lark_grammar.h).
  static Expected<std::shared_ptr<const EbnfGrammar>> compile_gbnf_or_lark(std::string_view text);
  // compile_gbnf_or_lark's reading and name checks (syntax, undefined or duplicate rules, no start
  // rule: the same errors), without lowering or the checks that need it (left recursion, rules
  // that never finish, the size and complexity limits), so it builds no automata.
  static Expected<ParsedGrammar> parse_gbnf_or_lark(std::string_view text);
  // Rules built in code (structural tags, structural_tag.h) lowered as compile() lowers parsed
  // ones; a kDfa item is the terminal automata[dfa] (never merged with neighbouring items), and
  // the automata count against kMaxGrammarTerminalBytes. Errors name rules, not text positions.
  static Expected<std::shared_ptr<const EbnfGrammar>> compile_rules(
      std::vector<EbnfRule> rules, std::string_view root,
      std::vector<std::shared_ptr<const ByteDfa>> automata);

  const std::vector<GrammarElement>& elements() const { return elements_; }
  const std::vector<GrammarRule>& rules() const { return rules_; }
  const ByteDfa& terminal(int32_t index) const { return *terminals_[static_cast<size_t>(index)]; }
  // Whether the terminal's `state` has a byte to go on with (an accepting state may not).
  bool terminal_continues(int32_t index, int32_t state) const {
    return continues_[static_cast<size_t>(index)][static_cast<size_t>(state)] != 0;
  }
  int32_t root() const { return root_; }
  size_t num_terminals() const { return terminals_.size(); }

 private:
  friend class GrammarLowering;
  EbnfGrammar() = default;

  std::vector<GrammarElement> elements_;
  std::vector<GrammarRule> rules_;
  std::vector<std::shared_ptr<const ByteDfa>> terminals_;
  std::vector<std::vector<uint8_t>> continues_;  // [terminal][state]
  int32_t root_ = 0;
};

}  // namespace beam
