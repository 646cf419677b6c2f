// Structural tags (compile_structural_tag): each format type on texts it accepts and refuses, the
// legacy shape, triggered tags' flags, free text's end and excluded strings, and the errors,
// which name the field's path inside the tag.
#include "runtime/structured/structural_tag.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/structured/ebnf_matcher.h"
#include "runtime/structured/free_text_dfa.h"
#include "structured_test_util.h"

namespace beam {
namespace {

using testing::verdict;

std::shared_ptr<const EbnfGrammar> compile_tag_ok(std::string_view tag) {
  auto g = compile_structural_tag(nlohmann::ordered_json::parse(tag));
  EXPECT_TRUE(g.ok()) << tag << ": " << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

std::string compile_tag_error(std::string_view tag) {
  auto g = compile_structural_tag(nlohmann::ordered_json::parse(tag));
  EXPECT_FALSE(g.ok()) << tag;
  return g.ok() ? "" : g.error().message;
}

// `format`'s whole matches include every `yes` and no `no`.
void expect_texts(std::string_view format, const std::vector<std::string>& yes,
                  const std::vector<std::string>& no) {
  const std::string tag = R"({"type": "structural_tag", "format": )" + std::string(format) + "}";
  auto g = compile_tag_ok(tag);
  ASSERT_NE(g, nullptr);
  const EbnfMatcher m(g);
  for (const std::string& s : yes) EXPECT_EQ(verdict(m, s), 2) << format << " on '" << s << "'";
  for (const std::string& s : no) EXPECT_NE(verdict(m, s), 2) << format << " on '" << s << "'";
}

constexpr const char* kPerson =
    R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type":
    "integer"}}, "required": ["name", "age"]})";

std::string function_tags(const std::string& flags) {
  return R"({"type": "triggered_tags", "triggers": ["<function="], "tags": [
      {"begin": "<function=func1>", "content": {"type": "json_schema", "json_schema": )" +
         std::string(kPerson) + R"(}, "end": "</function>"},
      {"begin": "<function=func2>", "content": {"type": "json_schema", "json_schema": )" +
         std::string(kPerson) + R"(}, "end": "</function>"}])" + flags + "}";
}

const std::string kCall1 = R"(<function=func1>{"name": "John", "age": 30}</function>)";
const std::string kCall2 = R"(<function=func2>{"name": "Jane", "age": 25}</function>)";

TEST(StructuralTag, ConstStringsJsonGrammarsAndRegexes) {
  expect_texts(R"({"type": "const_string", "value": "héllo \"x\""})", {"héllo \"x\""},
               {"hello \"x\"", "héllo \"x\"!", ""});
  expect_texts(R"({"type": "json_schema", "json_schema": {"type": "object", "properties": {"a":
                   {"type": "integer", "minimum": 1}}, "required": ["a"]}})",
               {R"({"a": 1})", R"( {"a":12})", "{\n  \"a\": 3\n}"},
               {R"({"a": 0})", R"({"a": "x"})", "{}", R"({"a": 1} )"});
  expect_texts(R"({"type": "json_schema", "json_schema": "{\"type\": \"integer\"}"})", {"-7"},
               {"7.5"});
  expect_texts(R"({"type": "grammar", "grammar": "root ::= word (\",\" word)*\nword ::= [a-z]+"})",
               {"ab,c", "x"}, {"ab,", "A", ""});
  expect_texts(
      R"({"type": "grammar", "grammar": "start: WORD (\"-\" WORD)?\n%import common.WORD"})",
      {"ab-cd", "x"}, {"ab-", "1"});
  expect_texts(R"({"type": "regex", "pattern": "[0-9]{2}-[a-z]"})", {"12-x"}, {"1-x", "12-x "});
}

TEST(StructuralTag, SequencesOrsAndTags) {
  expect_texts(R"({"type": "sequence", "elements": [{"type": "const_string", "value": "A:"},
                   {"type": "regex", "pattern": "[0-9]+"},
                   {"type": "const_string", "value": ";"}]})",
               {"A:12;"}, {"A:;", "A:12", "A:1;;"});
  expect_texts(R"({"type": "or", "elements": [{"type": "const_string", "value": "yes"},
                   {"type": "json_schema", "json_schema": {"type": "integer"}}]})",
               {"yes", "42"}, {"yes42", "no"});
  expect_texts(R"({"type": "tag", "begin": "<function=f>", "content": {"type": "json_schema",
                   "json_schema": {"type": "object"}}, "end": "</function>"})",
               {R"(<function=f>{"a": [1]}</function>)", "<function=f>{}</function>"},
               {"<function=f>{}", "<function=f>{}</function>x", "<function=f>[]</function>"});
  expect_texts(R"({"type": "tag", "begin": "<a>", "content": {"type": "const_string", "value":
                   "1"}, "end": ["</a>", "</A>"]})",
               {"<a>1</a>", "<a>1</A>"}, {"<a>1", "<a>1</b>"});
}

// Free text inside a tag stops at the tag's end: the text may not hold it, nor an excluded
// string; at the top it runs to the output's end.
TEST(StructuralTag, AnyTextStopsAtTheEndAndAvoidsExcludedStrings) {
  expect_texts(
      R"({"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end":
                   "</think>"})",
      {"<think>a<b </thin</think>", "<think></think>", "<think>\n\xC3\xA9</think>"},
      {"<think>a</think>b</think>", "<think>abc", "<think>a</think>x", "<think>\xC3(</think>"});
  expect_texts(R"({"type": "tag", "begin": "<t>", "content": {"type": "any_text", "excluded_str":
                   ["bad", "worse"]}, "end": "</t>"})",
               {"<t>ba d</t>", "<t>bab</t>"}, {"<t>a bad</t>", "<t>worse</t>", "<t>ba</t>d</t>"});
  expect_texts(R"({"type": "any_text", "excluded_str": ["</s>"]})", {"", "abc", "a</b>"},
               {"a</s>", "</s>b", "\xFF"});
  expect_texts(R"({"type": "sequence", "elements": [{"type": "const_string", "value": "x"},
                   {"type": "any_text"}]})",
               {"x", "xabc\n"}, {"y", ""});
  expect_texts(R"({"type": "tag", "begin": "<a>", "content": {"type": "or", "elements": [
                   {"type": "any_text"}, {"type": "const_string", "value": "fixed"}]},
                   "end": "</a>"})",
               {"<a>free</a>", "<a>fixed</a>", "<a></a>"}, {"<a>free", "<a>x</a></a>"});
}

TEST(StructuralTag, TriggeredTagsDispatchOnTheirTrigger) {
  const std::string calls = "text" + kCall1 + " more \xC3\xA9 " + kCall2 + "tail <function";
  expect_texts(function_tags(""), {"", "plain text", kCall1, calls, kCall1 + kCall2},
               {"x <function=func3>{}</function>", R"(<function=func1>{"name": 1}</function>)",
                "text " + kCall1.substr(0, 30), "a<function=func1>"});
  // at_least_one: a tag first, no text before it.
  expect_texts(function_tags(R"(, "at_least_one": true)"), {kCall1, kCall1 + "tail" + kCall2},
               {"", "text" + kCall1});
  // stop_after_first: nothing after the first tag.
  expect_texts(function_tags(R"(, "stop_after_first": true)"), {"abc" + kCall1, "abc", ""},
               {"abc" + kCall1 + "more", kCall1 + kCall2});
  expect_texts(function_tags(R"(, "at_least_one": true, "stop_after_first": true)"), {kCall2},
               {"", "x" + kCall2, kCall2 + "y"});
}

// The first trigger written dispatches: free text never holds a trigger elsewhere, and a trigger
// that is a suffix of another may end the text too.
TEST(StructuralTag, TriggersAreMatchedWhereTheyFirstOccur) {
  const char* tags = R"({"type": "triggered_tags", "triggers": ["<f", "a<f"], "tags": [
      {"begin": "<f>", "content": {"type": "const_string", "value": "1"}, "end": "</f>"},
      {"begin": "a<f>", "content": {"type": "const_string", "value": "2"}, "end": "</g>"}]})";
  expect_texts(tags, {"x<<f>1</f>", "a<f>2</g>", "a<f>1</f>", "ba<f>2</g><f>1</f>", "a<", "<g>"},
               {"<fx", "a<fx", "<f>2</f>", "x<f"});
}

TEST(StructuralTag, TriggeredTagsInsideATagStopAtItsEnd) {
  expect_texts(R"({"type": "tag", "begin": "<calls>", "end": "</calls>", "content":
      {"type": "triggered_tags", "triggers": ["<f="], "tags": [{"begin": "<f=a>", "content":
      {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": "</f>"}]}})",
               {"<calls>hi <f=a>1</f> bye</calls>", "<calls></calls>", "<calls><f=a>2</f></calls>"},
               {"<calls>hi</calls>x", "<calls><f=b>1</f></calls>", "<calls><f=a>x</f></calls>"});
  // stop_after_first inside a tag: its end right after the first tag.
  expect_texts(R"({"type": "tag", "begin": "<c>", "end": "</c>", "content": {"type":
      "triggered_tags", "triggers": ["<f"], "stop_after_first": true, "tags": [{"begin": "<f>",
      "content": {"type": "const_string", "value": "1"}, "end": "</f>"}]}})",
               {"<c>x<f>1</f></c>", "<c>x</c>"}, {"<c>x<f>1</f>y</c>", "<c><f>1</f><f>1</f></c>"});
}

TEST(StructuralTag, TagsWithSeparator) {
  const std::string tags = R"({"type": "tags_with_separator", "separator": ",", "tags": [
      {"begin": "<a>", "content": {"type": "const_string", "value": "1"}, "end": "</a>"},
      {"type": "tag", "begin": "<b>", "content": {"type": "json_schema", "json_schema":
      {"type": "integer"}}, "end": "</b>"}])";
  expect_texts(tags + "}", {"", "<a>1</a>", "<a>1</a>,<b>2</b>,<a>1</a>"},
               {"<a>1</a><b>2</b>", "x", "<a>1</a>,"});
  expect_texts(tags + R"(, "at_least_one": true})", {"<b>-3</b>"}, {""});
  expect_texts(tags + R"(, "stop_after_first": true})", {"", "<b>7</b>"}, {"<a>1</a>,<b>2</b>"});
  // A tag's content may be tags with a separator (DeepSeek's and Phi's layouts).
  expect_texts(R"({"type": "triggered_tags", "triggers": ["<calls>"], "stop_after_first": true,
      "tags": [{"begin": "<calls>[", "end": "]</calls>", "content": )" +
                   tags + R"(, "at_least_one": true}}]})",
               {"hi <calls>[<a>1</a>,<b>2</b>]</calls>", "hi <calls>[<a>1</a>]</calls>"},
               {"<calls>[]</calls>"});
}

TEST(StructuralTag, LegacyStructuresAndTriggers) {
  auto g = compile_tag_ok(R"({"type": "structural_tag", "structures": [{"begin": "<function=f>",
      "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
      "end": "</function>"}, {"begin": "<function=g>", "schema": {"type": "string"}, "end":
      "</function>"}], "triggers": ["<function="]})");
  ASSERT_NE(g, nullptr);
  const EbnfMatcher m(g);
  EXPECT_EQ(verdict(m, R"(hi <function=f>{"a": 1}</function> and <function=g>"s"</function>)"), 2);
  EXPECT_EQ(verdict(m, "no call"), 2);
  EXPECT_EQ(verdict(m, "<function=h>{}</function>"), 0);
  EXPECT_EQ(verdict(m, R"(<function=f>{"a": "1"})"), 0);
  EXPECT_EQ(verdict(m, R"(<function=f>{"a": 1})"), 1);
}

TEST(StructuralTag, ErrorsNameThePath) {
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "bogus"}})"),
            "'format.type': unknown format \"bogus\" (expected const_string, json_schema, "
            "grammar, regex, sequence, or, tag, any_text, triggered_tags or tags_with_separator)");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "tag", "begin": "<a>", "end": "</a>"}})"),
            "'format.content': is required");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "sequence", "elements": [{"type":
                "const_string"}]}})"),
            "'format.elements[0].value': is required");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "triggered_tags", "triggers": ["<f="], "tags":
                [{"begin": "<g>", "content": {"type": "any_text"}, "end": "</g>"}]}})"),
            "'format.tags[0].begin': \"<g>\" starts with none of the triggers");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "triggered_tags", "triggers": ["<f", "<f="],
                "tags": [{"begin": "<f=a>", "content": {"type": "any_text"}, "end": "</f>"}]}})"),
            "'format.tags[0].begin': \"<f=a>\" starts with two triggers, \"<f\" and \"<f=\"");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "triggered_tags", "triggers": ["<f=", "<g="],
                "tags": [{"begin": "<f=a>", "content": {"type": "any_text"}, "end": "</f>"}]}})"),
            "'format.triggers[1]': no tag's begin starts with \"<g=\"");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "sequence", "elements": [{"type": "any_text"},
                {"type": "const_string", "value": "x"}]}})"),
            "'format.elements[0]': free text (any_text, triggered_tags) runs to the end of what "
            "holds it, so only the last element of a sequence may be one");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "tag", "begin": "<a>", "content": {"type":
                "any_text"}, "end": ""}})"),
            "'format.end': a tag whose content is free text needs non-empty end strings (they "
            "end the text)");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "tag", "begin": "<t>", "content": {"type":
                "any_text", "excluded_str": ["<"]}, "end": "</t>"}})"),
            "'format.content': no text can end with the end string without an excluded one");
  EXPECT_EQ(
      compile_tag_error(R"({"format": {"type": "json_schema", "json_schema": {"type": "integer",
                "multipleOf": 2}}})"),
      "'format.json_schema': /multipleOf: the keyword \"multipleOf\" is not supported by "
      "constrained decoding");
  EXPECT_EQ(
      compile_tag_error(R"({"format": {"type": "json_schema", "json_schema": {"type": "string",
                "maxLength": 100000}}})"),
      "'format.json_schema': '/maxLength': \"maxLength\" 100000 is too long for a "
      "structural tag (more than 16384 automaton states)");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "grammar", "grammar": "root ::= x"}})"),
            "'format.grammar': grammar line 1:10: rule 'root' refers to undefined rule 'x'");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "qwen_xml_parameter", "json_schema": {}}})"),
            "'format.type': \"qwen_xml_parameter\" is not supported (write the parameters as a "
            "json_schema, or a grammar)");
  EXPECT_EQ(compile_tag_error(R"({"structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}]})"),
            "'triggers': is required");
  EXPECT_EQ(compile_tag_error(R"({"structures": [{"begin": "<f>", "end": "</f>"}], "triggers":
                ["<f>"]})"),
            "'structures[0].schema': is required");
  EXPECT_EQ(compile_tag_error(R"({"type": "json_schema", "format": {}})"),
            "'type': expected \"structural_tag\"");
  EXPECT_EQ(compile_tag_error(R"({"type": "structural_tag"})"),
            "'format': is required (or the legacy 'structures' and 'triggers')");
  std::string deep = R"({"type": "const_string", "value": "x"})";
  for (int i = 0; i < 70; ++i) deep = R"({"type": "or", "elements": [)" + deep + "]}";
  EXPECT_EQ(compile_tag_error(R"({"format": )" + deep + "}").substr(0, 60),
            "'format.elements[0].elements[0].elements[0].elements[0].elem");
}

// A tag's grammar elements are read (syntax, rule names) where they stand and lowered once with
// the whole tag, under one budget: an error of the lowering names the element's rules by its path,
// and equal grammar texts share one set of rules (50 copies of a grammar each took a whole
// grammar's budget twice before: 16 s for the audit's).
TEST(StructuralTag, GrammarElementsLowerOnceWithTheTag) {
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "sequence", "elements": [
                {"type": "const_string", "value": "x"},
                {"type": "grammar", "grammar": "root ::= \"a\" root"}]}})"),
            "the tag's grammar: rule 'format.elements[1].grammar.root' can never finish: each of "
            "its alternatives needs it again");
  EXPECT_EQ(compile_tag_error(R"({"format": {"type": "sequence", "elements": [
                {"type": "grammar", "grammar": "root ::= \"a\""},
                {"type": "grammar", "grammar": "root ::= x\nx ::= \"a\"? root \"b\" | \"c\""}]}})")
                .substr(0, 96),
            "the tag's grammar: rule 'format.elements[1].grammar.root' is left-recursive: it can "
            "reach itself");
  const std::string list =
      R"({"type": "grammar", "grammar": )"
      R"("root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"(\" root \")\""})";
  const auto sequence = [&](int copies) {
    std::string elements;
    for (int i = 0; i < copies; ++i)
      elements += (i ? R"(, {"type": "const_string", "value": ";"}, )" : "") + list;
    return compile_tag_ok(R"({"format": {"type": "sequence", "elements": [)" + elements + "]}}");
  };
  const auto one = sequence(1), fifty = sequence(50);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(fifty, nullptr);
  EXPECT_EQ(fifty->rules().size(), one->rules().size());
  std::string text = "a,(b,c)";
  for (int i = 1; i < 50; ++i) text += ";x,(y)";
  const EbnfMatcher m(fifty);
  EXPECT_EQ(verdict(m, text), 2);
  EXPECT_EQ(verdict(m, text + ";z"), 0);
}

// Many long triggers make one free-text automaton per trigger, each over all of them: refused by
// the grammar's automaton bytes before they are all built.
TEST(StructuralTag, TooManyTriggersAreRefused) {
  nlohmann::ordered_json triggers = nlohmann::ordered_json::array(),
                         tags = nlohmann::ordered_json::array();
  for (int i = 0; i < 100; ++i) {
    std::string t = "<" + std::to_string(i) + "_";
    for (int k = 0; k < 120; ++k) t += static_cast<char>('!' + (i * 7 + k * 13) % 90);
    triggers.push_back(t);
    tags.push_back({{"begin", t + ">"}, {"content", {{"type", "any_text"}}}, {"end", "</c>"}});
  }
  const nlohmann::ordered_json tag = {
      {"format", {{"type", "triggered_tags"}, {"triggers", triggers}, {"tags", tags}}}};
  auto g = compile_structural_tag(tag);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().message,
            "'format': the grammar is too complex: its terminals' automata pass 64 MiB");
}

// A tag's schemas become grammar rules (two per optional property): 30 objects of 999
// properties pass kMaxJsonSchemaRules and are refused before they are lowered (999 of them held
// 13 GB on the way to the grammar's element limit).
TEST(StructuralTag, SchemasPastTheRuleLimitAreRefused) {
  nlohmann::ordered_json inner = nlohmann::ordered_json::object();
  for (int j = 0; j < 999; ++j) inner["q" + std::to_string(j)] = {{"type", "string"}};
  nlohmann::ordered_json outer = nlohmann::ordered_json::object();
  for (int i = 0; i < 30; ++i)
    outer["p" + std::to_string(i)] = {{"type", "object"}, {"properties", inner}};
  const nlohmann::ordered_json tag = {
      {"format",
       {{"type", "json_schema"}, {"json_schema", {{"type", "object"}, {"properties", outer}}}}}};
  auto g = compile_structural_tag(tag);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().message,
            "'format.json_schema': the schemas are too large for one grammar (more than 20000 "
            "rules)");
}

// Free text's automaton: stops, barriers and excluded strings on every short text.
TEST(FreeTextDfa, FirstCompletedStringDecides) {
  auto dfa = free_text_dfa({.stops = {"ab"}, .barriers = {"b"}, .excluded = {"x"}});
  ASSERT_TRUE(dfa.ok()) << dfa.error().message;
  for (const auto& [text, whole] : std::vector<std::pair<std::string, bool>>{{"ab", true},
                                                                             {"aab", true},
                                                                             {"cab", true},
                                                                             {"b", false},
                                                                             {"bab", false},
                                                                             {"abab", false},
                                                                             {"xab", false},
                                                                             {"", false},
                                                                             {"a", false}})
    EXPECT_EQ((*dfa)->matches(text), whole) << text;
  auto free = free_text_dfa({.stops = {}, .barriers = {"ab"}, .excluded = {"é"}});
  ASSERT_TRUE(free.ok());
  for (const auto& [text, whole] : std::vector<std::pair<std::string, bool>>{
           {"", true}, {"a b", true}, {"ab", false}, {"e\xC3\xA9", false}, {"\xC3", false}})
    EXPECT_EQ((*free)->matches(text), whole) << text;
}

}  // namespace
}  // namespace beam
