// Content parsers, content_args, transforms and tool-argument casting (transformers semantics).
#include <gtest/gtest.h>

#include "parser_test_util.h"
#include "server/parsers/content_spec.h"
#include "server/parsers/tool_arg_coercion.h"

namespace beam::server::testing {
namespace {

Expected<Json> parse(ContentKind kind, std::string_view args, std::string_view body) {
  return parse_content(body, make_content_spec(kind, Json::parse(args)));
}

TEST(ContentParsers, ScalarsAndStrip) {
  EXPECT_EQ(*parse(ContentKind::kText, "{}", "  hi \n"), "hi");
  EXPECT_EQ(*parse(ContentKind::kText, R"({"strip": 0})", "  hi \n"), "  hi \n");
  EXPECT_EQ(*parse(ContentKind::kInt, "{}", " 42\n"), 42);
  EXPECT_EQ(*parse(ContentKind::kInt, R"({"strip": false})", " 42"), 42);  // int() strips itself
  EXPECT_FALSE(parse(ContentKind::kInt, "{}", "4 2").ok());
  EXPECT_TRUE(parse(ContentKind::kFloat, "{}", "3")->is_number_float());
  EXPECT_EQ(*parse(ContentKind::kBool, "{}", " TRUE "), true);
  EXPECT_EQ(*parse(ContentKind::kBool, "{}", "1"), true);
  EXPECT_EQ(*parse(ContentKind::kBool, "{}", "yes"), false);
}

TEST(ContentParsers, JsonDialects) {
  EXPECT_JSON_EQ(*parse(ContentKind::kJson, "{}", " {\"a\": 1} "), Json::parse(R"({"a": 1})"));
  EXPECT_FALSE(parse(ContentKind::kJson, "{}", "{a: 1}").ok());
  EXPECT_JSON_EQ(*parse(ContentKind::kJson, R"({"unquoted_keys": true})", "{a:1,b_2:{c:2}}"),
                 Json::parse(R"({"a": 1, "b_2": {"c": 2}})"));
  EXPECT_JSON_EQ(
      *parse(ContentKind::kJson,
             R"js({"unquoted_keys": true, "string_delims": [["<|\"|>", "<|\"|>"], "''"]})js",
             R"({k:<|"|>a, "b": {c}<|"|>,q:'x\y'})"),
      Json::parse(R"({"k": "a, \"b\": {c}", "q": "x\\y"})"));
  EXPECT_FALSE(
      parse(ContentKind::kJson, R"({"string_delims": [["<", ">"]]})", "{\"a\": \"\x01\"}").ok());
  EXPECT_EQ(*parse(ContentKind::kJson, R"({"allow_non_json": true})", "  not json  "), "not json");
  EXPECT_FALSE(parse(ContentKind::kJson, R"({"string_delims": "ab"})", "{}").ok());
  EXPECT_FALSE(parse(ContentKind::kJson, R"({"string_delims": [["a"]]})", "{}").ok());
}

TEST(ContentParsers, XmlInline) {
  const std::string args = R"({"tag_pattern": "<(?P<key>\\w+)>(?P<value>.*?)</\\1>"})";
  EXPECT_JSON_EQ(*parse(ContentKind::kXmlInline, args, "<a>1</a> <b> x </b><a>2</a>"),
                 Json::parse(R"({"a": "2", "b": " x "})"));
  EXPECT_JSON_EQ(
      *parse(ContentKind::kXmlInline, R"({"tag_pattern": "<(?P<key>\\w+)>(?P<value>.*?)</\\1>",
                          "merge_duplicates": 1, "value_parser": {"name": "json"}})",
             "<a>[1]</a><a>2</a><b>{}</b>"),
      Json::parse(R"({"a": [1, 2], "b": {}})"));
  EXPECT_JSON_EQ(
      *parse(ContentKind::kXmlInline, R"({"tag_pattern": "<(?P<key>\\w+)/>"})", "<a/><b/>"),
      Json::parse(R"({"a": "", "b": ""})"));  // no 'value' group: ""
  EXPECT_JSON_EQ(*parse(ContentKind::kXmlInline,
                        R"({"tag_pattern": "<(?P<key>\\w+)(?:=(?P<value>\\w+))?>"})", "<a><b=1>"),
                 Json::parse(R"({"a": null, "b": "1"})"));  // 'value' group that did not take part
  EXPECT_FALSE(parse(ContentKind::kXmlInline,
                     R"({"tag_pattern": "<(?P<key>\\w+)(?:=(?P<value>\\w+))?>",
                       "value_parser": {"name": "int"}})",
                     "<a>")
                   .ok());
  EXPECT_FALSE(parse(ContentKind::kXmlInline, R"({"tag_pattern": "<(?P<k>\\w+)>"})", "<a>").ok());
  // Problems in content_args surface when a region is parsed (as in transformers), not at load.
  EXPECT_FALSE(parse(ContentKind::kXmlInline, "{}", "<a>").ok());
  EXPECT_FALSE(parse(ContentKind::kXmlInline, R"({"tag_pattern": "("})", "").ok());
  EXPECT_FALSE(parse(ContentKind::kXmlInline,
                     R"({"tag_pattern": "<(?P<key>a)>", "value_parser": {"name": "yaml"}})", "<a>")
                   .ok());
  EXPECT_JSON_EQ(
      *parse(ContentKind::kXmlInline,
             R"({"tag_pattern": "<(?P<key>a)>", "value_parser": {"name": "yaml"}})", "none"),
      Json::object());
  EXPECT_FALSE(parse(ContentKind::kText, "[]", "x").ok());
}

TEST(ContentParsers, KvLines) {
  EXPECT_JSON_EQ(
      *parse(ContentKind::kKvLines, "{}", "name: alice\nage: 30\n\nno separator\nurl: http://x"),
      Json::parse(R"({"name": "alice", "age": "30", "url": "http://x"})"));
  EXPECT_JSON_EQ(*parse(ContentKind::kKvLines,
                        R"({"line_sep": ";", "kv_sep": "=", "value_parser": {"name": "int"}})",
                        "a=1; b = 2;;c=3"),
                 Json::parse(R"({"a": 1, "b": 2, "c": 3})"));
  EXPECT_FALSE(parse(ContentKind::kKvLines, R"({"line_sep": ""})", "").ok());
  EXPECT_FALSE(parse(ContentKind::kKvLines, R"({"kv_sep": ""})", "a").ok());
  EXPECT_FALSE(parse(ContentKind::kKvLines, R"({"kv_sep": 5})", "a").ok());
}

TEST(Transforms, PlaceholdersLiteralsAndErrors) {
  auto transform = Transform::compile(Json::parse(R"({"type": "function", "n": 3, "flag": null,
      "function": {"name": "{name}", "arguments": "{content.args}"}, "list": ["{name}", "{literal"]})"),
                                      "Field 'x'");
  ASSERT_TRUE(transform.ok());
  auto applied = transform->apply(Json::parse(R"({"name": "f", "content": {"args": {"a": 1}}})"));
  ASSERT_TRUE(applied.ok());
  EXPECT_JSON_EQ(*applied, Json::parse(R"({"type": "function", "n": 3, "flag": null,
      "function": {"name": "f", "arguments": {"a": 1}}, "list": ["f", "{literal"]})"));
  auto missing = transform->apply(Json::parse(R"({"content": {"args": 1}})"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "KeyError: transform placeholder '{name}' is not defined. Available: ['content']");
  auto index = transform->apply(Json::parse(R"({"name": "f", "content": "s"})"));
  EXPECT_EQ(index.error().message,
            "transform placeholder '{content.args}' cannot index into str at 'args'");
  auto mixed = Transform::compile(Json::parse(R"({"label": "name: {content}"})"), "Field 'tool'");
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().message.find("string interpolation is not supported"), std::string::npos);
  EXPECT_TRUE(Transform::compile(Json::parse(R"("{ content }")"), "s").ok());  // not a placeholder
}

TEST(ToolArgCoercion, CastsLikeTransformers) {
  using T = std::vector<std::string>;
  EXPECT_EQ(coerce_argument("not-a-number", T{"integer"}), "not-a-number");
  EXPECT_EQ(coerce_argument("5", T{"integer", "null"}), 5);
  EXPECT_EQ(coerce_argument("null", T{"integer", "null"}), nullptr);
  EXPECT_EQ(coerce_argument("None", T{"null"}), nullptr);
  for (auto [raw, value] :
       {std::pair{"true", true}, {"True", true}, {"1", true}, {"false", false}, {"0", false}}) {
    EXPECT_EQ(coerce_argument(raw, T{"boolean"}), value) << raw;
  }
  EXPECT_EQ(coerce_argument("maybe", T{"boolean"}), "maybe");
  EXPECT_EQ(coerce_argument("[1, 2]", T{"object"}), "[1, 2]");
  EXPECT_EQ(coerce_argument("{\"a\": 1}", T{"array"}), "{\"a\": 1}");
  EXPECT_JSON_EQ(coerce_argument("{\"a\": 1}", T{"object"}), Json::parse(R"({"a": 1})"));
  EXPECT_EQ(coerce_argument("NaN", T{"number"}), "NaN");
  EXPECT_JSON_EQ(coerce_argument("1e3", T{"number"}), Json(1000));
  EXPECT_JSON_EQ(coerce_argument("1.0", T{"number"}), Json(1.0));
  EXPECT_JSON_EQ(coerce_argument("5", T{"string", "integer"}), Json(5));  // "string" never casts
  EXPECT_EQ(coerce_argument("1.50", T{"string", "object"}), "1.50");
}

TEST(ToolArgCoercion, SchemaTypesAndToolLookup) {
  using T = std::vector<std::string>;
  EXPECT_EQ(schema_types(Json::parse(R"({"type": "integer"})")), T{"integer"});
  EXPECT_EQ(schema_types(Json::parse(R"({"type": ["integer", "string", 3]})")),
            (T{"integer", "string"}));
  EXPECT_EQ(schema_types(Json::parse(R"({"anyOf": [{"type": "boolean"}, {"type": "string"}]})")),
            (T{"boolean", "string"}));
  EXPECT_EQ(schema_types(Json::parse(R"({"type": "integer", "nullable": true})")),
            (T{"integer", "null"}));
  EXPECT_EQ(schema_types(Json::parse(R"({"description": "no type"})")), T{});
  const ToolSchemas tools = ToolSchemas::from_tools(Json::parse(R"([
      "not a tool", {"function": {"name": 5}},
      {"name": "bare", "parameters": {"properties": {"n": {"type": "integer"}}}},
      {"type": "function", "function": {"name": "wrapped", "parameters": {"properties": {"n": {"type": "number"}}}}}])"));
  EXPECT_FALSE(tools.empty());
  Json calls =
      Json::parse(R"([{"function": {"name": "bare", "arguments": {"n": "7", "other": "8"}}},
      {"function": {"name": "wrapped", "arguments": {"n": ["1.5", "x", 2]}}},
      {"function": {"name": ["bare"], "arguments": {"n": "7"}}}, "text"])");
  tools.coerce_tool_calls(calls);
  EXPECT_JSON_EQ(
      calls, Json::parse(R"([{"function": {"name": "bare", "arguments": {"n": 7, "other": "8"}}},
      {"function": {"name": "wrapped", "arguments": {"n": [1.5, "x", 2]}}},
      {"function": {"name": ["bare"], "arguments": {"n": "7"}}}, "text"])"));
  EXPECT_TRUE(ToolSchemas::from_tools(Json()).empty());
}

}  // namespace
}  // namespace beam::server::testing
