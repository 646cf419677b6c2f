// JSON schemas as grammar rules (JsonSchemaRules, json_scalar_dfa) against JsonMatcher, the
// reference: on random walks through documents the two allow the same next bytes and the same
// ends at every position, and numbers with bounds agree on every short text.
#include "runtime/structured/json_schema_rules.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "runtime/structured/ebnf_matcher.h"
#include "runtime/structured/json_scalar_dfa.h"
#include "structured_test_util.h"

namespace beam {
namespace {

using testing::grammar_of;

std::shared_ptr<const EbnfGrammar> rules_of(std::shared_ptr<const JsonGrammar> json) {
  std::vector<EbnfRule> rules;
  std::vector<std::shared_ptr<const ByteDfa>> automata;
  Expected<std::string> root = JsonSchemaRules(rules, automata).add(json, "j");
  EXPECT_TRUE(root.ok()) << root.error().message;
  if (!root.ok()) return nullptr;
  auto g = EbnfGrammar::compile_rules(std::move(rules), *root, std::move(automata));
  EXPECT_TRUE(g.ok()) << g.error().message;
  return g.ok() ? *g : nullptr;
}

std::string rules_error(std::string_view schema) {
  std::vector<EbnfRule> rules;
  std::vector<std::shared_ptr<const ByteDfa>> automata;
  Expected<std::string> root = JsonSchemaRules(rules, automata).add(grammar_of(schema), "j");
  return root.ok() ? "" : root.error().message;
}

// Bytes a walk tries after each prefix: JSON's punctuation and whitespace, digits and number
// signs, letters of keys, literals and escapes, and a two-byte character.
constexpr std::string_view kAlphabet =
    " \n\t{}[],:\"\\0123456789-+.eEabcdefgilmnorstuvxyz/@\xC3\xA9";

// Random walks: at every position both matchers allow the same alphabet bytes and agree on
// whether the text may end. The next byte is one of the allowed; past max_len bytes a walk
// prefers bytes that close strings and containers, and it stops at an end with some chance.
void expect_same_language(std::string_view schema, int walks, size_t max_len = 80) {
  const auto json = grammar_of(schema);
  ASSERT_NE(json, nullptr);
  const auto grammar = rules_of(json);
  ASSERT_NE(grammar, nullptr) << schema;
  const JsonMatcher jm(json);
  const EbnfMatcher em(grammar);
  std::mt19937 rng(7);
  int ends = 0;
  for (int w = 0; w < walks; ++w) {
    MatchState js = jm.initial(), jscratch;
    GrammarState gs = em.initial(), gscratch;
    std::string text;
    while (text.size() < 4 * max_len) {
      ASSERT_EQ(jm.can_end(js), em.can_end(gs)) << schema << " after '" << text << "'";
      std::string allowed;
      for (char c : kAlphabet) {
        MatchState jn;
        GrammarState gn;
        const bool j_ok = jm.advance(js, static_cast<uint8_t>(c), jn);
        const bool g_ok = em.advance(gs, static_cast<uint8_t>(c), gn);
        ASSERT_EQ(j_ok, g_ok) << schema << " after '" << text << "' on '" << c << "'";
        if (j_ok) allowed += c;
      }
      if (jm.can_end(js) && (allowed.empty() || rng() % 4 == 0)) {
        ++ends;
        break;
      }
      if (allowed.empty()) break;
      std::string closing;
      for (char c : allowed)
        if (c == '"' || c == '}' || c == ']') closing += c;
      if (text.size() > max_len && !closing.empty()) allowed = closing;
      const char c = allowed[rng() % allowed.size()];
      text += c;
      ASSERT_TRUE(jm.advance(js, static_cast<uint8_t>(c), jscratch));
      std::swap(js, jscratch);
      ASSERT_TRUE(em.advance(gs, static_cast<uint8_t>(c), gscratch));
      std::swap(gs, gscratch);
    }
  }
  EXPECT_GT(ends, walks / 4) << schema << ": too few walks reached a whole document";
}

TEST(JsonSchemaRules, ObjectsArraysAndEnumsMatchTheMatcher) {
  for (const char* schema : {
           R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type":
               "integer", "minimum": 0, "maximum": 120}, "tags": {"type": "array", "items":
               {"type": "string"}, "minItems": 1, "maxItems": 3}}, "required": ["name"]})",
           R"({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"},
               "c": {"enum": [1, "x", [true]]}}})",
           R"({"type": "object", "properties": {"a": {"type": "boolean"}},
               "additionalProperties": {"type": "integer"}})",
           R"({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type":
               "integer"}}, "required": ["y"], "additionalProperties": true})",
           R"({"type": "object"})",
           R"(true)",
           R"({"anyOf": [{"type": "string", "enum": ["red", "green"]}, {"type": "null"},
               {"type": "boolean"}, {"const": {"a": [1, 2]}}, {"type": "array", "maxItems": 0}]})",
           R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
               "items": {"type": "boolean"}, "minItems": 1, "maxItems": 4})",
           R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
               "items": false})",
           R"({"type": "array", "items": {"type": "number"}, "minItems": 2})",
           R"({"type": ["string", "integer", "null"]})",
       })
    expect_same_language(schema, 150);
}

TEST(JsonSchemaRules, RecursiveSchemasMatchTheMatcher) {
  expect_same_language(
      R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
          "next": {"$ref": "#/$defs/node"}}, "required": ["v"]}}, "$ref": "#/$defs/node"})",
      150, 120);
  expect_same_language(
      R"({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}})",
      150, 120);
}

TEST(JsonSchemaRules, StringsMatchTheMatcher) {
  for (const char* schema : {
           R"({"type": "string", "minLength": 2, "maxLength": 4})",
           R"({"type": "string", "minLength": 3})",
           R"({"type": "string", "pattern": "^[a-z]+@[a-z]+\\.(com|org)$"})",
           R"({"type": "string", "pattern": "^a.c$", "maxLength": 3})",
           R"({"type": "string", "pattern": "^[\"\\\\/ é]{1,3}$"})",
           R"({"type": "string", "pattern": "b", "minLength": 2, "maxLength": 5})",
           R"({"type": "string", "format": "date"})",
       })
    expect_same_language(schema, 150);
}

TEST(JsonSchemaRules, NumbersMatchTheMatcher) {
  for (const char* schema : {
           R"({"type": "number"})",
           R"({"type": "integer"})",
           R"({"type": "array", "items": {"type": "integer", "minimum": -120, "maximum": -7}})",
           R"({"type": "number", "exclusiveMinimum": 0.001, "maximum": 0.5})",
       })
    expect_same_language(schema, 150);
}

// Every text of up to 6 bytes over digits, signs and a dot: the number automaton accepts, keeps
// alive or refuses it exactly as the matcher does.
TEST(JsonSchemaRules, BoundedNumbersAgreeOnEveryShortText) {
  for (const char* schema : {
           R"({"type": "integer", "minimum": 0, "maximum": 120})",
           R"({"type": "integer", "minimum": -120, "maximum": -7})",
           R"({"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 1234})",
           R"({"type": "integer", "minimum": -3})",
           R"({"type": "integer", "maximum": 42})",
           R"({"type": "integer", "minimum": 0, "maximum": 0})",
           R"({"type": "number", "minimum": 0, "maximum": 1})",
           R"({"type": "number", "exclusiveMinimum": 0.001, "maximum": 0.5})",
           R"({"type": "number", "minimum": -2.5})",
           R"({"type": "number", "exclusiveMaximum": 0})",
           R"({"type": "number", "minimum": 0.25, "maximum": 0.25})",
           R"({"type": "number", "exclusiveMinimum": -1.5, "exclusiveMaximum": -0.25})",
           R"({"type": "number", "minimum": 0})",
       }) {
    const auto json = grammar_of(schema);
    ASSERT_NE(json, nullptr);
    auto dfa = json_number_dfa(*json, json->root());
    ASSERT_TRUE(dfa.ok()) << schema << ": " << dfa.error().message;
    const JsonMatcher m(json);
    std::string s;
    std::function<void()> each = [&] {
      MatchState state = m.initial(), scratch;
      const bool alive = m.advance_bytes(state, s, scratch);
      const int32_t d = (*dfa)->walk(0, s);
      ASSERT_EQ(alive, d != ByteDfa::kDead) << schema << " on '" << s << "'";
      ASSERT_EQ(alive && m.can_end(state), d != ByteDfa::kDead && (*dfa)->accepting(d))
          << schema << " on '" << s << "'";
      if (s.size() == 6 || !alive) return;
      for (char c : std::string_view("-0125.9")) {
        s.push_back(c);
        each();
        s.pop_back();
      }
    };
    each();
  }
}

// A number has at most kMaxJsonNumberBytes bytes, in both.
TEST(JsonSchemaRules, NumbersStopAtTheMatchersLength) {
  const auto json = grammar_of(R"({"type": "array", "items": {"type": "number"}})");
  const auto grammar = rules_of(json);
  ASSERT_NE(grammar, nullptr);
  const JsonMatcher jm(json);
  const EbnfMatcher em(grammar);
  for (size_t digits : {39, 40, 41}) {
    const std::string text = "[-" + std::string(digits - 1, '7') + "]";
    MatchState js = jm.initial(), jscratch;
    GrammarState gs = em.initial(), gscratch;
    const bool j_ok = jm.advance_bytes(js, text, jscratch) && jm.can_end(js);
    const bool g_ok = em.advance_bytes(gs, text, gscratch) && em.can_end(gs);
    EXPECT_EQ(j_ok, digits <= 40) << digits;
    EXPECT_EQ(g_ok, j_ok) << digits;
  }
}

TEST(JsonSchemaRules, LimitsAreRefusedNamingTheKeyword) {
  EXPECT_EQ(rules_error(R"({"type": "object", "properties": {"s": {"type": "string", "maxLength":
      100000}}})"),
            "'/properties/s/maxLength': \"maxLength\" 100000 is too long for a structural tag "
            "(more than 16384 automaton states)");
  EXPECT_EQ(rules_error(R"({"type": "array", "minItems": 20000})"),
            "'/minItems': past 10000 items (after prefixItems) is too many for a structural tag");
  std::string wide = R"({"anyOf": [)";
  for (int i = 0; i < 1001; ++i)
    wide += std::string(i ? "," : "") + R"({"const": )" + std::to_string(i) + "}";
  EXPECT_EQ(rules_error(wide + "]}"),
            "'/anyOf': more than 1000 alternatives are too many for a structural tag");
}

}  // namespace
}  // namespace beam
