// A JsonGrammar's strings and numbers as automata over their whole text, accepting exactly what
// JsonMatcher accepts for the node (json_matcher.h), so that a grammar holding JSON
// (json_schema_rules.h) writes the same texts the matcher does.
#pragma once

#include <memory>

#include "core/status.h"
#include "runtime/structured/byte_dfa.h"
#include "runtime/structured/json_grammar.h"

namespace beam {

// Most states of one string's automaton (its length bounds multiply the states of its lexer and
// pattern; a string past it is refused).
inline constexpr int32_t kMaxJsonStringStates = 16384;

// A kString node's text, quotes included: JSON's escapes and valid UTF-8, its length bounds (code
// points, an escape one) and its pattern (matched against the decoded value; no \u escape then).
// An error names the node's keywords when its automaton passes kMaxJsonStringStates.
Expected<std::shared_ptr<const ByteDfa>> json_string_dfa(const JsonGrammar& grammar,
                                                         GrammarNodeId node);

// A kNumber or kInteger node's text: JSON's number syntax in at most kMaxJsonNumberBytes, inside
// its bounds (a bounded number has no exponent; "-0" is zero).
Expected<std::shared_ptr<const ByteDfa>> json_number_dfa(const JsonGrammar& grammar,
                                                         GrammarNodeId node);

}  // namespace beam
