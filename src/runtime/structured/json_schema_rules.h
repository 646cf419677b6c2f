// A JsonGrammar's JSON text as grammar rules, one per node, for structural tags (a tag's JSON
// content is part of one EbnfGrammar): compiled with EbnfGrammar::compile_rules they accept
// exactly what JsonMatcher accepts, whitespace included, except that objects and arrays may nest
// past kMaxJsonDepth (the grammar's stack bounds them instead). Strings and numbers are
// automata of their own (json_scalar_dfa.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/structured/ebnf_syntax.h"
#include "runtime/structured/json_grammar.h"

namespace beam {

// Most properties of one object, and alternatives of one anyOf, held as rules (each is a parse
// the grammar's matcher keeps at once; kMaxGrammarStacks bounds those).
inline constexpr size_t kMaxJsonRuleBranches = 1000;
// Most rules all of one tag's schemas may become (an optional property takes two): past it a
// tag of 999 objects of 999 properties held 13 GB before the grammar's element limit refused it.
inline constexpr size_t kMaxJsonSchemaRules = 20000;

class JsonSchemaRules {
 public:
  // Rules and automata are appended to these (EbnfGrammar::compile_rules' arguments).
  JsonSchemaRules(std::vector<EbnfRule>& rules,
                  std::vector<std::shared_ptr<const ByteDfa>>& automata)
      : rules_(rules), automata_(automata) {}

  // Appends the rules of `grammar`'s JSON text, named "<prefix>.<node>[.<part>]", and returns the
  // name of the rule that matches the whole text. An error names the schema keyword and its JSON
  // pointer when a grammar cannot hold it (a too long string, a count past kMaxGrammarRepeat, a
  // branching past kMaxJsonRuleBranches), or says the rules pass kMaxJsonSchemaRules.
  Expected<std::string> add(std::shared_ptr<const JsonGrammar> grammar, const std::string& prefix);

 private:
  Expected<EbnfExpr> node_body(GrammarNodeId id);
  Expected<EbnfExpr> object_body(GrammarNodeId id);
  Expected<EbnfExpr> array_body(GrammarNodeId id);
  // A kDfa item for the automaton `key` names, built by `build` on first use (shared by the
  // schemas of one tag).
  template <typename Build>
  Expected<EbnfExpr> automaton(const std::string& key, Build build);
  EbnfExpr value(GrammarNodeId id);  // a reference to the node's rule (emitted later)
  std::string name(GrammarNodeId id) const { return prefix_ + "." + std::to_string(id); }
  void add_rule(std::string name, EbnfExpr body);

  std::vector<EbnfRule>& rules_;
  std::vector<std::shared_ptr<const ByteDfa>>& automata_;
  std::map<std::string, int32_t> automaton_index_;  // key → index into automata_
  std::shared_ptr<const JsonGrammar> grammar_;      // the one add() is converting
  std::string prefix_;
  std::vector<GrammarNodeId> pending_;  // nodes referred to whose rules are not written yet
  std::vector<uint8_t> seen_;           // [node] referred to
};

}  // namespace beam
