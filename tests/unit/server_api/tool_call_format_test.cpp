// Required tool calls under constrained decoding: the call schema (one tool, several, local $refs
// rebased), and when beam-nano's template and tokenizer allow the constraint.
#include "server/api/tool_call_format.h"

#include <gtest/gtest.h>

#include "runtime/structured/json_matcher.h"
#include "server/api/served_model.h"
#include "server/parsers/builtin_templates.h"

namespace beam::server {
namespace {

bool matches(const Json& schema, std::string_view text) {
  auto grammar = JsonGrammar::from_schema(schema);
  EXPECT_TRUE(grammar.ok()) << (grammar.ok() ? "" : grammar.error().message);
  if (!grammar.ok()) return false;
  const JsonMatcher m(*grammar);
  MatchState s = m.initial(), scratch;
  return m.advance_bytes(s, text, scratch) && m.can_end(s);
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "move", "parameters": {
     "type": "object", "$defs": {"dir": {"enum": ["up", "down"]}},
     "properties": {"to": {"$ref": "#/$defs/dir"},
                    "then": {"type": "array", "items": {"$ref": "#/$defs/dir"}}},
     "required": ["to"]}}},
  {"type": "function", "function": {"name": "stop"}}])");

TEST(ToolCallFormat, SchemasOfOneCallRebaseEachToolsReferences) {
  const Json one = tool_call_schema(Json::array({kTools[0]}));
  EXPECT_TRUE(matches(one, R"({"name": "move", "arguments": {"to": "up", "then": ["down"]}})"));
  EXPECT_FALSE(matches(one, R"({"name": "move", "arguments": {"to": "left"}})"));
  EXPECT_FALSE(matches(one, R"({"name": "stop", "arguments": {}})"));
  const Json both = tool_call_schema(kTools);
  EXPECT_TRUE(matches(both, R"({"name": "move", "arguments": {"to": "down"}})"));
  EXPECT_TRUE(matches(
      both, R"({"name": "stop", "arguments": {"any": [1]}})"));  // no parameters: any object
  EXPECT_FALSE(matches(both, R"({"name": "stop", "arguments": 3})"));
  EXPECT_FALSE(matches(both, R"({"arguments": {}, "name": "stop"})"));  // the template's key order
}

// A served model with beam-nano's tokenizer and the Hermes response template (no engine).
class ToolCallModel : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = text::Tokenizer::load("models/beam-nano");
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    m.tokenizer.emplace(std::move(*tok));
    m.structured_vocab = build_structured_vocab(*m.tokenizer, m.tokenizer->vocab_size());
    auto rt = load_hermes_response_template();
    ASSERT_TRUE(rt.ok());
    m.response_template = *rt;
  }
  ServedModel m;
};

TEST_F(ToolCallModel, ConstrainedWhereTheModelAllowsItElseSteered) {
  std::optional<ResponseFormat> f = tool_call_format(m, kTools, /*parallel=*/true);
  ASSERT_TRUE(f.has_value());
  ASSERT_TRUE(f->call_close.has_value());
  EXPECT_EQ(f->call_close, m.tokenizer->token_to_id("</tool_call>"));
  EXPECT_EQ(f->call_open, m.tokenizer->token_to_id("<tool_call>"));
  EXPECT_FALSE(f->reasoning_prelude);
  std::optional<ResponseFormat> once = tool_call_format(m, kTools, /*parallel=*/false);
  ASSERT_TRUE(once.has_value());
  EXPECT_EQ(once->call_close, f->call_close);
  EXPECT_FALSE(once->call_open.has_value());
  // A parameter schema constrained decoding cannot enforce (a lookahead): the call stays
  // steered only.
  Json patterned = kTools;
  patterned[0]["function"]["parameters"]["properties"]["to"] =
      Json{{"type", "string"}, {"pattern", "^(?=u)"}};
  EXPECT_FALSE(tool_call_format(m, patterned, true).has_value());
  m.response_template = nullptr;
  EXPECT_FALSE(tool_call_format(m, kTools, true).has_value());
}

// The same tools again (an agent's next turn) take the schema compiled for the first request,
// once make_output_constraint has shared it through the model's SchemaCache.
TEST_F(ToolCallModel, TheSameToolsCompileOnce) {
  m.schemas = std::make_shared<SchemaCache>();
  std::optional<ResponseFormat> first = tool_call_format(m, kTools, true);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->schema_text, tool_call_schema(kTools).dump());
  auto constraint = make_output_constraint(m, *first, "", /*chat=*/true, {});
  ASSERT_TRUE(constraint.ok());
  std::optional<ResponseFormat> again = tool_call_format(m, kTools, true);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->grammar, first->grammar);
  EXPECT_EQ(m.schemas->size(), 1u);
  std::optional<ResponseFormat> other = tool_call_format(m, Json::array({kTools[1]}), true);
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(other->grammar, first->grammar);
}

}  // namespace
}  // namespace beam::server
