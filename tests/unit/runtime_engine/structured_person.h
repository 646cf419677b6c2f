// A bounded JSON schema and a bounded GBNF grammar (every output of them ends within a few hundred
// tokens) for engine tests of constrained decoding, beam-nano's vocabulary for their masks, and
// the checks of a finished output.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/structured/output_constraint.h"
#include "server/api/response_format.h"
#include "text/tokenizer.h"

namespace beam::testing {

inline constexpr const char* kPersonSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "langs": {"type": "array", "items": {"enum": ["c++", "python", "go"]}, "maxItems": 3},
    "active": {"type": "boolean"}},
  "required": ["name", "age", "langs", "active"]})";

// A JSON-schema constraint over beam-nano's tokenizer (no reasoning prelude).
inline std::shared_ptr<const OutputConstraint> person_constraint(const text::Tokenizer& tok,
                                                                 int64_t vocab_size) {
  auto grammar = JsonGrammar::from_schema(nlohmann::ordered_json::parse(kPersonSchema));
  EXPECT_TRUE(grammar.ok());
  auto c = std::make_shared<OutputConstraint>();
  c->grammar = *grammar;
  c->vocab = server::build_structured_vocab(tok, vocab_size);
  return c;
}

// The output ended by an eos or stop id (kept as its last token), and the text before it is a
// person of the schema, its keys in the schema's order.
inline void expect_person(const text::Tokenizer& tok, const std::vector<int32_t>& tokens,
                          std::optional<FinishReason> finish) {
  ASSERT_EQ(finish, FinishReason::kStop);
  ASSERT_FALSE(tokens.empty());
  std::vector<text::TokenId> body(tokens.begin(), tokens.end() - 1);
  auto text = tok.decode(body, /*skip_special=*/false);
  ASSERT_TRUE(text.ok());
  nlohmann::ordered_json v = nlohmann::ordered_json::parse(*text, nullptr, false);
  ASSERT_FALSE(v.is_discarded()) << *text;
  std::vector<std::string> keys;
  for (const auto& [k, _] : v.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "age", "langs", "active"})) << *text;
  EXPECT_TRUE(v["name"].is_string() && v["age"].is_number_integer() && v["langs"].is_array() &&
              v["active"].is_boolean())
      << *text;
  EXPECT_LE(v["langs"].size(), 3u) << *text;
}

// Nested lists (a recursive grammar) of at most 4 items at the top and 3 below.
inline constexpr const char* kNestedListsGbnf = R"g(
    root ::= "result: " item (", " item){0,3}
    item ::= "[" (item ("," item){0,2})? "]" | [0-9]{1,2} | ("yes" | "no")
  )g";

// A kNestedListsGbnf constraint over beam-nano's tokenizer.
inline std::shared_ptr<const OutputConstraint> nested_lists_constraint(const text::Tokenizer& tok,
                                                                       int64_t vocab_size) {
  auto grammar = EbnfGrammar::compile(kNestedListsGbnf);
  EXPECT_TRUE(grammar.ok()) << grammar.error().message;
  auto c = std::make_shared<OutputConstraint>();
  c->ebnf = *grammar;
  c->vocab = server::build_structured_vocab(tok, vocab_size);
  return c;
}

// The output ended by an eos or stop id (kept as its last token), and the text before it is a
// whole match of kNestedListsGbnf.
inline void expect_nested_lists(const text::Tokenizer& tok, const std::vector<int32_t>& tokens,
                                std::optional<FinishReason> finish) {
  ASSERT_EQ(finish, FinishReason::kStop);
  ASSERT_FALSE(tokens.empty());
  auto text = tok.decode(std::vector<text::TokenId>(tokens.begin(), tokens.end() - 1),
                         /*skip_special=*/false);
  ASSERT_TRUE(text.ok());
  auto grammar = EbnfGrammar::compile(kNestedListsGbnf);
  ASSERT_TRUE(grammar.ok());
  const EbnfMatcher m(*grammar);
  GrammarState state = m.initial(), scratch;
  EXPECT_TRUE(m.advance_bytes(state, *text, scratch)) << *text;
  EXPECT_TRUE(m.can_end(state)) << *text;
}

}  // namespace beam::testing
