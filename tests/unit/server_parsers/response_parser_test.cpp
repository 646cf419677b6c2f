// ResponseParser behaviour: events, hold-back of partial delimiters, prompt prefixes, zero-width
// delimiters, errors, interruption, linear scanning. (Parse results against transformers are in
// golden_fixtures_test.cpp; chunking invariance in chunking_property_test.cpp.)
#include <random>

#include "parser_test_util.h"

namespace beam::server::testing {
namespace {

using Kind = ParseEvent::Kind;

constexpr std::string_view kQwen3 = R"js({
  "defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
  "fields": {
    "thinking": {"open": "<think>", "close": "</think>"},
    "tool_calls": {"open_pattern": "<tool_call>\\s*<function=(?P<name>\\w+)>", "close": "</tool_call>",
                   "repeats": true, "content": "xml-inline",
                   "content_args": {"tag_pattern": "<parameter=(?P<key>\\w+)>\\s*(?P<value>.*?)\\s*</parameter>"},
                   "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}}}})js";

constexpr std::string_view kSmol = R"js({
  "defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
  "fields": {
    "thinking": {"open": "<think>", "close": "</think>"},
    "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "repeats": true, "content": "json",
                   "transform": {"type": "function", "function": "{content}"}},
    "content": {"close": "<|im_end|>"}}})js";

ResponseParser make_parser(std::shared_ptr<const ResponseTemplate> t, std::string_view prefix,
                           ParserOptions options = {}) {
  auto parser = ResponseParser::create(std::move(t), prefix, std::move(options));
  EXPECT_TRUE(parser.ok());
  return std::move(parser).value();
}

std::vector<std::pair<Kind, std::string>> kinds_and_fields(const ResponseTemplate& t,
                                                           const std::vector<ParseEvent>& events) {
  std::vector<std::pair<Kind, std::string>> out;
  for (const auto& e : events) out.emplace_back(e.kind, t.fields[e.field].name);
  return out;
}

std::string chunk_text(const std::vector<ParseEvent>& events) {
  std::string out;
  for (const auto& e : events) {
    if (e.kind == Kind::kRegionChunk) out += e.text;
  }
  return out;
}

TEST(ResponseParser, PlainTextStreamsWithoutHoldBack) {
  auto t = load_template(
      R"js({"start_anchor": "A", "fields": {"content": {"close": ["<turn|>", "<|tool_response>", "<eos>"]}}})js");
  auto parser = make_parser(t, "");
  std::vector<ParseEvent> events;
  ASSERT_TRUE(parser.feed(std::string(32, 'x'), &events).ok());
  EXPECT_EQ(chunk_text(events), std::string(32, 'x'));
  EXPECT_EQ(parser.held_back_bytes(), 0u);
}

TEST(ResponseParser, HoldsBackOnlyPossibleDelimiterStarts) {
  auto t = load_template(kSmol);
  auto parser = make_parser(t, "");
  std::vector<ParseEvent> events;
  ASSERT_TRUE(parser.feed("Hello <thi", &events).ok());
  EXPECT_EQ(chunk_text(events), "Hello ");
  EXPECT_EQ(parser.held_back_bytes(), 4u);
  events.clear();
  ASSERT_TRUE(parser.feed("s is not a tag", &events).ok());  // "<this" can no longer be "<think>"
  EXPECT_EQ(chunk_text(events), "<this is not a tag");
  EXPECT_EQ(parser.held_back_bytes(), 0u);
}

TEST(ResponseParser, CompleteLiteralCommitsAtOnce) {
  auto t = load_template(kSmol);
  auto parser = make_parser(t, "");
  std::vector<ParseEvent> events;
  ASSERT_TRUE(parser.feed("<think>", &events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kRegionOpen);
  EXPECT_EQ(events[0].text, "<think>");
  EXPECT_EQ(parser.held_back_bytes(), 0u);
}

TEST(ResponseParser, GrowableDelimitersWaitForTheNextByte) {
  // A literal that prefixes another literal of the list, and a regex at the buffer end.
  auto t = load_template(R"js({"start_anchor": "A", "fields": {
      "x": {"open": "<x>", "close": ["END", "ENDX"]},
      "y": {"open": "<y>", "close_pattern": "</y>\\s*"}}})js");
  auto parser = make_parser(t, "");
  std::vector<ParseEvent> events;
  ASSERT_TRUE(parser.feed("<x>hiEND", &events).ok());
  for (const auto& e : events) EXPECT_NE(e.kind, Kind::kRegionClose);
  ASSERT_TRUE(parser.feed(" more<y>v</y>", &events).ok());
  ASSERT_EQ(std::count_if(events.begin(), events.end(),
                          [](const auto& e) { return e.kind == Kind::kRegionClose; }),
            1);
  ASSERT_TRUE(parser.feed("\n\n", &events).ok());
  ASSERT_TRUE(parser.feed("z", &events).ok());
  EXPECT_EQ(events.back().kind, Kind::kRegionClose);
  EXPECT_EQ(events.back().text, "</y>\n\n");
  auto message = parser.finalize(&events);
  ASSERT_TRUE(message.ok());
  EXPECT_JSON_EQ(*message, Json::parse(R"js({"x": "hi", "y": "v"})js"));
}

TEST(ResponseParser, PrefixLandsInsideExplicitRegion) {
  auto t = load_template(kQwen3);
  const std::string prompt =
      "<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\nEarlier<|im_end|>\n<|im_start|>assistant\n<think>\n";
  auto parser = make_parser(t, prompt);
  using P = std::pair<Kind, std::string>;
  EXPECT_EQ(kinds_and_fields(*t, parser.initial_events()),
            (std::vector<P>{{Kind::kRegionOpen, "thinking"}, {Kind::kRegionChunk, "thinking"}}));
  std::vector<ParseEvent> events;
  ASSERT_TRUE(parser.feed("Let me think...</think>", &events).ok());
  EXPECT_EQ(kinds_and_fields(*t, events),
            (std::vector<P>{{Kind::kRegionChunk, "thinking"}, {Kind::kRegionClose, "thinking"}}));
  auto message = parser.finalize(&events);
  EXPECT_JSON_EQ(*message,
                 Json::parse(R"js({"role": "assistant", "thinking": "Let me think..."})js"));
}

TEST(ResponseParser, PrefixRegionOpenedAndClosedLandsInMessage) {
  auto t =
      load_template(R"js({"defaults": {"role": "assistant"}, "start_anchor": "[BEGIN]", "fields": {
      "tag": {"open": "<tag>", "close": "</tag>"}, "body": {"close_pattern": "$"}}})js");
  auto parser = make_parser(t, "noise[BEGIN]<tag>silently consumed</tag>");
  std::vector<Kind> kinds;
  for (const auto& e : parser.initial_events()) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<Kind>{Kind::kRegionOpen, Kind::kRegionChunk, Kind::kRegionClose}));
  EXPECT_EQ(parser.initial_events().back().value, "silently consumed");
  std::vector<ParseEvent> events;
  ASSERT_TRUE(parser.feed("real generated body", &events).ok());
  auto message = parser.finalize(&events);
  EXPECT_JSON_EQ(
      *message,
      Json::parse(
          R"js({"role": "assistant", "tag": "silently consumed", "body": "real generated body"})js"));
}

TEST(ResponseParser, PrefixEndingMidDelimiterOpensOnFirstFeed) {
  auto t = load_template(kQwen3);
  auto parser = make_parser(t, "<|im_start|>assistant\n<thi");
  EXPECT_TRUE(parser.initial_events().empty());
  std::vector<ParseEvent> events;
  ASSERT_TRUE(parser.feed("nk>real body</think>", &events).ok());
  EXPECT_EQ(events.front().kind, Kind::kRegionOpen);
  EXPECT_JSON_EQ(*parser.finalize(&events),
                 Json::parse(R"js({"role": "assistant", "thinking": "real body"})js"));
}

TEST(ResponseParser, EventsAreWellFormedForEveryChunking) {
  auto t = load_template(kSmol);
  const std::string text =
      "<think>plan</think>\nSome text<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"
      "more<tool_call>{\"name\": \"g\", \"arguments\": {\"a\": [1]}}</tool_call><|im_end|>tail";
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i) {
      if (rng() % 3 == 0) cuts.push_back(i);
    }
    ParseRun run = parse_chunks(t, "", split_at(text, cuts));
    ASSERT_TRUE(run.message);
    std::optional<size_t> open;
    for (const ParseEvent& e : run.events) {
      switch (e.kind) {
        case Kind::kRegionOpen:
          ASSERT_FALSE(open.has_value());
          open = e.field;
          break;
        case Kind::kRegionChunk:
          ASSERT_EQ(open, e.field);
          EXPECT_FALSE(e.text.empty());
          EXPECT_EQ(e.dirty, t->fields[e.field].name == "tool_calls");
          break;
        case Kind::kRegionClose:
          ASSERT_EQ(open, e.field);
          open.reset();
          break;
      }
    }
    EXPECT_FALSE(open.has_value());
    EXPECT_EQ(run.chunks_of(*t, "thinking"), "plan");
  }
}

TEST(ResponseParser, ChunksNeverSplitUtf8Sequences) {
  auto t = load_template(kSmol);
  const std::string text = "<think>日本語🙂é</think>Ответ";
  ParseRun run;
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(std::string_view(text).substr(i, 1));
  run = parse_chunks(t, "", bytes);
  ASSERT_TRUE(run.message);
  for (const ParseEvent& e : run.events) {
    if (e.kind != Kind::kRegionChunk) continue;
    std::string valid;
    append_valid_utf8(&valid, e.text);
    EXPECT_EQ(valid, e.text);
  }
  EXPECT_JSON_EQ(
      *run.message,
      Json::parse(
          R"js({"role": "assistant", "thinking": "日本語🙂é", "content": "Ответ"})js"));
  // Bytes that are not UTF-8 become U+FFFD wherever the deltas are split.
  const std::string invalid = "<think>a\xff\xc3(b\xed\xa0\x80</think>\xe6\x97";
  const std::string expected = "a\uFFFD\uFFFD(b\uFFFD\uFFFD\uFFFD";
  for (size_t cut = 1; cut < invalid.size(); ++cut) {
    ParseRun split = parse_chunks(t, "", split_at(invalid, {cut}));
    ASSERT_TRUE(split.message);
    EXPECT_EQ((*split.message)["thinking"], Json::parse("\"" + expected + "\"")) << cut;
    EXPECT_EQ((*split.message)["content"], Json::parse(R"js("\uFFFD\uFFFD")js")) << cut;
  }
}

TEST(ResponseParser, ZeroWidthCloseOnEmptyRegionDoesNotLoop) {
  // The implicit region closes before "X" without consuming it; transformers then stops there.
  auto t = load_template(
      R"js({"start_anchor": "A", "fields": {"content": {"close_pattern": "(?=X)"}}})js");
  ParseRun run = parse_once(t, "", "abcXdef");
  ASSERT_TRUE(run.message);
  EXPECT_JSON_EQ(*run.message, Json::parse(R"js({"content": "abc"})js"));
  ParseRun starts_with = parse_once(t, "", "Xdef");
  ASSERT_TRUE(starts_with.message);
  EXPECT_JSON_EQ(*starts_with.message, Json::object());
}

TEST(ResponseParser, ZeroWidthOpenAndCloseCycleTerminates) {
  // transformers would spin forever here; the parser stops the pass and still finishes.
  auto t = load_template(
      R"js({"start_anchor": "A", "fields": {"x": {"open_pattern": "(?=a)", "close_pattern": "(?=a)"}}})js");
  ParseRun run = parse_chunks(t, "", {"a", "b"});
  EXPECT_TRUE(run.message.has_value()) << run.error;
}

TEST(ResponseParser, FieldErrorsFailOrKeepRawText) {
  auto t = load_template(kSmol);
  const std::string text = "<tool_call>{bad json</tool_call>after";
  ParseRun strict = parse_once(t, "", text);
  EXPECT_FALSE(strict.message);
  EXPECT_NE(strict.error.find("json parser could not parse region as JSON"), std::string::npos);
  ParserOptions lenient;
  lenient.field_errors = ParserOptions::FieldErrors::kKeepRawText;
  ParseRun kept = parse_once(t, "", text, lenient);
  ASSERT_TRUE(kept.message) << kept.error;
  EXPECT_JSON_EQ(*kept.message, Json::parse(R"js({"role": "assistant", "content": "after"})js"));
  auto close = std::find_if(kept.events.begin(), kept.events.end(),
                            [](const ParseEvent& e) { return e.kind == Kind::kRegionClose; });
  ASSERT_NE(close, kept.events.end());
  ASSERT_TRUE(close->error.has_value());
  EXPECT_EQ(close->text, "</tool_call>");
}

TEST(ResponseParser, FailedParserStaysFailedAndFinalizeIsOnce) {
  auto t = load_template(kSmol);
  auto parser = make_parser(t, "");
  std::vector<ParseEvent> events;
  EXPECT_FALSE(parser.feed("<tool_call>{</tool_call>", &events).ok());
  EXPECT_FALSE(parser.feed("more", &events).ok());
  EXPECT_FALSE(parser.finalize(&events).ok());
  auto fresh = make_parser(t, "");
  ASSERT_TRUE(fresh.finalize(&events).ok());
  EXPECT_FALSE(fresh.feed("x", &events).ok());
  EXPECT_FALSE(fresh.finalize(&events).ok());
}

TEST(ResponseParser, InterruptingOpensEndExplicitRegions) {
  auto t = load_template(kSmol);
  ParserOptions options;
  options.interruptible_fields = {*t->field_index("thinking")};
  options.interrupting_fields = {*t->field_index("tool_calls")};
  ParseRun run = parse_once(
      t, "", "<think>plan<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", options);
  ASSERT_TRUE(run.message);
  EXPECT_JSON_EQ(*run.message, Json::parse(R"js({"role": "assistant", "thinking": "plan",
      "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]})js"));
  ParseRun plain = parse_once(t, "", "<think>plan<tool_call>{}</tool_call>");
  EXPECT_JSON_EQ(
      *plain.message,
      Json::parse(R"js({"role": "assistant", "thinking": "plan<tool_call>{}</tool_call>"})js"));
}

TEST(ResponseParser, ToolSchemasCastStringArguments) {
  auto t = load_template(kQwen3);
  ParserOptions options;
  options.tools = ToolSchemas::from_tools(
      Json::parse(R"js([{"type": "function", "function": {"name": "set_alarm",
      "parameters": {"type": "object", "properties": {"hour": {"type": "integer"}, "on": {"type": "boolean"}}}}}])js"));
  const std::string call =
      "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n"
      "<parameter=on>\ntrue\n</parameter>\n</function>\n</tool_call>";
  ParseRun run = parse_once(t, "", call, options);
  EXPECT_JSON_EQ((*run.message)["tool_calls"][0]["function"]["arguments"],
                 Json::parse(R"js({"hour": 7, "on": true})js"));
  ParseRun uncast = parse_once(t, "", call);
  EXPECT_JSON_EQ((*uncast.message)["tool_calls"][0]["function"]["arguments"],
                 Json::parse(R"js({"hour": "7", "on": "true"})js"));
}

// Work stays linear: a long generation fed token by token scans each byte a bounded number of
// times, and a long buffer is compacted (lookbehind and ^ still behave).
TEST(ResponseParser, ScanningIsLinearInTheInput) {
  auto t = load_template(R"js({"start_anchor": "A", "fields": {
      "first": {"open_pattern": "^<first>", "close": "</first>"},
      "line": {"open_pattern": "(?<=\n)@", "close_pattern": "(?=\n)"},
      "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "repeats": true, "content": "json"},
      "content": {"close": "<|im_end|>"}}})js");
  std::string text = "<first>head</first>";
  std::mt19937 rng(3);
  while (text.size() < 200000) {
    const uint32_t pick = rng() % 4;
    if (pick == 0) {
      text += "\n@note " + std::to_string(rng() % 1000);
    } else if (pick == 1) {
      text += "<tool_call>{\"n\": " + std::to_string(rng() % 100) + "}</tool_call>";
    } else {
      text += " word <tool but not a call> < more text";
    }
  }
  std::vector<size_t> cuts;
  for (size_t i = 3; i < text.size(); i += 1 + rng() % 6) cuts.push_back(i);
  auto parser = make_parser(t, "");
  std::vector<ParseEvent> events;
  for (std::string_view delta : split_at(text, cuts)) {
    ASSERT_TRUE(parser.feed(delta, &events).ok());
    events.clear();
  }
  auto streamed = parser.finalize(&events);
  ASSERT_TRUE(streamed.ok());
  const size_t watched = 5;  // delimiters searched per position at most
  EXPECT_LT(parser.scanned_bytes(), 4 * watched * text.size());
  auto whole = make_parser(t, "");
  ASSERT_TRUE(whole.feed(text, &events).ok());
  auto once = whole.finalize(&events);
  ASSERT_TRUE(once.ok());
  EXPECT_LT(whole.scanned_bytes(), 4 * watched * text.size());
  EXPECT_JSON_EQ(*streamed, *once);
  EXPECT_EQ((*streamed)["first"], "head");
}

}  // namespace
}  // namespace beam::server::testing
