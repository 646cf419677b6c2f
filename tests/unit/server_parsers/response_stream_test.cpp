// ResponseStream: reasoning/content/tool-call deltas for the server, built-in template selection.
#include "server/parsers/response_stream.h"

#include <random>

#include "golden_corpus.h"
#include "parser_test_util.h"
#include "server/parsers/builtin_templates.h"

namespace beam::server::testing {
namespace {

constexpr std::string_view kQwenPrompt =
    "<|im_start|>system\nCall tools as <tool_call>{...}</tool_call>.<|im_end|>\n"
    "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n";

std::shared_ptr<const ResponseTemplate> hermes() {
  auto t = load_hermes_response_template();
  EXPECT_TRUE(t.ok());
  return *t;
}

struct StreamRun {
  std::vector<ResponseDelta> deltas;
  ParsedResponse response;
  std::string text_of(ResponseDelta::Kind kind) const {
    std::string out;
    for (const auto& d : deltas) {
      if (d.kind == kind) out += d.text;
    }
    return out;
  }
};

StreamRun stream(std::shared_ptr<const ResponseTemplate> t, std::string_view prompt,
                 const std::vector<std::string_view>& chunks, ResponseStreamOptions options = {}) {
  StreamRun run;
  ResponseStream s(std::move(t), prompt, std::move(options));
  for (std::string_view c : chunks) s.feed(c, &run.deltas);
  run.response = s.finish(&run.deltas);
  return run;
}

std::vector<std::string_view> bytes_of(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < text.size(); ++i) out.push_back(text.substr(i, 1));
  return out;
}

// Everything observable about a run except how text deltas were split.
std::string outcome(const StreamRun& run) {
  std::string out = "R:" + run.text_of(ResponseDelta::Kind::kReasoning) +
                    "\nC:" + run.text_of(ResponseDelta::Kind::kContent) + "\n";
  for (const auto& d : run.deltas) {
    if (d.kind == ResponseDelta::Kind::kToolCallStart)
      out += "T" + std::to_string(d.tool_index) + " " + d.tool_call_id + " " + d.tool_name + "\n";
    if (d.kind == ResponseDelta::Kind::kToolCallArguments)
      out += "A" + std::to_string(d.tool_index) + " " + d.text + "\n";
  }
  out += "M:" + json_text(run.response.message) +
         "\nW:" + std::to_string(run.response.warnings.size());
  return out;
}

TEST(ResponseStream, HermesReasoningContentAndToolCalls) {
  const std::string output =
      "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
      "2}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\nBoth requested.";
  StreamRun run = stream(hermes(), kQwenPrompt, {output});
  const ParsedResponse& r = run.response;
  EXPECT_EQ(r.reasoning, "The user wants weather.");
  EXPECT_EQ(r.content, "Let me check.\n\nBoth requested.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(r.tool_calls[0].id, "call_0");
  EXPECT_EQ(r.tool_calls[1].name, "get_time");
  EXPECT_EQ(r.tool_calls[1].arguments, "{}");
  EXPECT_TRUE(r.warnings.empty());
  // The streamed text is exactly the message the template describes.
  EXPECT_EQ(r.message["thinking"], r.reasoning);
  EXPECT_EQ(r.message["content"], r.content);
  EXPECT_EQ(r.message["tool_calls"].size(), 2u);
  EXPECT_EQ(run.text_of(ResponseDelta::Kind::kReasoning), r.reasoning);
  EXPECT_EQ(run.text_of(ResponseDelta::Kind::kContent), r.content);
}

TEST(ResponseStream, ToolCallNameAndArgumentsOnlyOnceComplete) {
  const std::string output =
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
  ResponseStream s(hermes(), kQwenPrompt);
  std::vector<ResponseDelta> deltas;
  const size_t close_at = output.find("</tool_call>");
  for (size_t i = 0; i < output.size(); ++i) {
    s.feed(output.substr(i, 1), &deltas);
    // Held until the close delimiter is complete (and, for `</tool_call>\s*`, decided).
    if (i < close_at + std::string("</tool_call>").size() - 1) {
      for (const auto& d : deltas) EXPECT_NE(d.kind, ResponseDelta::Kind::kToolCallStart) << i;
    }
  }
  ParsedResponse r = s.finish(&deltas);
  ASSERT_EQ(deltas.size(), 2u);
  EXPECT_EQ(deltas[0].kind, ResponseDelta::Kind::kToolCallStart);
  EXPECT_EQ(deltas[0].tool_name, "get_weather");
  EXPECT_EQ(deltas[1].kind, ResponseDelta::Kind::kToolCallArguments);
  EXPECT_TRUE(Json::parse(deltas[1].text).is_object());
  EXPECT_TRUE(r.content.empty());
}

TEST(ResponseStream, ToolCallStartEndsReasoning) {
  const std::string output =
      "<think>I will call it<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": "
      "1}}</tool_call>Done.";
  StreamRun run = stream(hermes(), kQwenPrompt, bytes_of(output));
  EXPECT_EQ(run.response.reasoning, "I will call it");
  ASSERT_EQ(run.response.tool_calls.size(), 1u);
  EXPECT_EQ(run.response.tool_calls[0].name, "f");
  EXPECT_EQ(run.response.content, "Done.");
  // A </think> after the call closes nothing and does not leak into the content.
  StreamRun closed_late = stream(hermes(), kQwenPrompt, bytes_of(output + "</think>\nMore."));
  EXPECT_EQ(closed_late.response.content, "Done.\n\nMore.");
  EXPECT_EQ(closed_late.response.tool_calls.size(), 1u);
  // transformers' behaviour, when asked for: the call stays inside the reasoning.
  ResponseStreamOptions hf;
  hf.tool_call_ends_reasoning = false;
  StreamRun swallowed = stream(hermes(), kQwenPrompt, {output}, hf);
  EXPECT_TRUE(swallowed.response.tool_calls.empty());
  EXPECT_NE(swallowed.response.reasoning.find("<tool_call>"), std::string::npos);
}

TEST(ResponseStream, MalformedToolJsonComesBackAsContent) {
  const std::string output =
      "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>";
  StreamRun run = stream(hermes(), kQwenPrompt, bytes_of(output));
  EXPECT_TRUE(run.response.tool_calls.empty());
  EXPECT_EQ(run.response.content,
            "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>");
  ASSERT_EQ(run.response.warnings.size(), 1u);
  EXPECT_NE(run.response.warnings[0].find("returned as content"), std::string::npos);
}

TEST(ResponseStream, UnusableToolCallsComeBackAsContent) {
  for (const std::string body :
       {"{\"arguments\": {}}", "{\"name\": \"\"}", "{\"name\": \"f\", \"arguments\": [1]}",
        "{\"name\": \"f\", \"arguments\": \"not json\"}", "[1, 2]", "\"text\""}) {
    SCOPED_TRACE(body);
    StreamRun run = stream(hermes(), kQwenPrompt, {"<tool_call>" + body + "</tool_call>"});
    EXPECT_TRUE(run.response.tool_calls.empty());
    EXPECT_EQ(run.response.content, "<tool_call>" + body + "</tool_call>");
    EXPECT_EQ(run.response.warnings.size(), 1u);
  }
  StreamRun string_args =
      stream(hermes(), kQwenPrompt,
             {"<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>"});
  ASSERT_EQ(string_args.response.tool_calls.size(), 1u);
  EXPECT_EQ(string_args.response.tool_calls[0].arguments, R"({"a":1})");
}

TEST(ResponseStream, ToolCallsKeptAsTextWhenGivenTheContentRole) {
  ResponseStreamOptions options;
  options.roles.tool_calls.clear();
  options.roles.content.push_back("tool_calls");
  const std::string call = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n";
  StreamRun run = stream(hermes(), kQwenPrompt, bytes_of("Calling." + call + "Done."), options);
  EXPECT_TRUE(run.response.tool_calls.empty());
  EXPECT_EQ(run.response.content, "Calling." + call + "\n\nDone.");
  EXPECT_TRUE(run.response.warnings.empty());
}

TEST(ResponseStream, TruncatedToolCallAtEndIsContent) {
  StreamRun run = stream(hermes(), kQwenPrompt, {"<tool_call>{\"name\": \"f\", \"argu"});
  EXPECT_TRUE(run.response.tool_calls.empty());
  EXPECT_EQ(run.response.content, "<tool_call>{\"name\": \"f\", \"argu");
}

TEST(ResponseStream, PromptPrefillIsStateNotOutput) {
  StreamRun think = stream(hermes(), std::string(kQwenPrompt) + "<think>\n",
                           {"Quick thought.</think>\n\nIt is sunny."});
  EXPECT_EQ(think.response.reasoning, "Quick thought.");
  EXPECT_EQ(think.response.content, "It is sunny.");
  StreamRun prefill = stream(hermes(), std::string(kQwenPrompt) + "Sure, here is", {" the answer"});
  EXPECT_EQ(prefill.response.content, " the answer");
  EXPECT_EQ(prefill.response.message["content"], "Sure, here is the answer");
}

TEST(ResponseStream, InvalidUtf8InPromptOrOutputIsReplaced) {
  StreamRun run = stream(hermes(), "\xff" + std::string(kQwenPrompt) + "<think>\n\xe6",
                         {"\x97\xa5 ok</think>\xc3", "(done"});
  EXPECT_EQ(run.response.reasoning, "\xE6\x97\xA5 ok");
  EXPECT_EQ(run.response.content, "\xEF\xBF\xBD(done");
  EXPECT_TRUE(run.response.warnings.empty());
}

TEST(ResponseStream, BeamChannelTemplateCastsArgumentsByToolSchema) {
  const GoldenCorpus& corpus = golden_corpus();
  auto golden = std::find_if(corpus.templates.begin(), corpus.templates.end(),
                             [](const GoldenTemplate& t) { return t.name == "beam_channel"; });
  ASSERT_NE(golden, corpus.templates.end());
  auto t = *load_response_template(golden->spec);
  const GoldenCase& c = golden->cases[1];  // tools_cast
  ResponseStreamOptions options;
  options.tools = c.tools;
  options.tool_call_id_prefix = "call_req7_";
  StreamRun run = stream(t, c.prefix, bytes_of(c.output), options);
  EXPECT_EQ(run.response.reasoning, "Look it up.");
  ASSERT_EQ(run.response.tool_calls.size(), 2u);
  EXPECT_EQ(run.response.tool_calls[0].id, "call_req7_0");
  EXPECT_EQ(run.response.tool_calls[0].name, "weather.lookup");
  EXPECT_EQ(run.response.tool_calls[0].arguments, R"({"city":"Paris","days":3,"metric":true})");
  EXPECT_EQ(run.response.tool_calls[1].arguments, R"({"window":{"from":1,"to":2}})");
  EXPECT_JSON_EQ(run.response.message, c.expected);
}

// Chunking never changes what the client sees (text split aside): golden corpus, server mode.
TEST(ResponseStream, DeltasIndependentOfChunking) {
  std::mt19937 rng(99);
  for (const GoldenTemplate& golden : golden_corpus().templates) {
    auto t = *load_response_template(golden.spec);
    for (const GoldenCase& c : golden.cases) {
      SCOPED_TRACE(golden.name + "/" + c.name);
      ResponseStreamOptions options;
      options.tools = c.tools;
      const std::string expected = outcome(stream(t, c.prefix, {c.output}, options));
      EXPECT_EQ(outcome(stream(t, c.prefix, bytes_of(c.output), options)), expected);
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<size_t> cuts;
        for (size_t i = 1; i < c.output.size(); ++i) {
          if (rng() % 5 == 0) cuts.push_back(i);
        }
        EXPECT_EQ(outcome(stream(t, c.prefix, split_at(c.output, cuts), options)), expected);
      }
    }
  }
}

// With the built-in template the streamed text is the message transformers builds.
TEST(ResponseStream, HermesStreamEqualsGoldenMessage) {
  const GoldenCorpus& corpus = golden_corpus();
  auto golden = std::find_if(corpus.templates.begin(), corpus.templates.end(),
                             [](const GoldenTemplate& t) { return t.name == "hermes_builtin"; });
  ASSERT_NE(golden, corpus.templates.end());
  for (const GoldenCase& c : golden->cases) {
    if (c.expected_error) continue;
    SCOPED_TRACE(c.name);
    ResponseStreamOptions transformers_mode;  // a call inside <think> stays reasoning, as there
    transformers_mode.tool_call_ends_reasoning = false;
    StreamRun run = stream(hermes(), c.prefix, bytes_of(c.output), transformers_mode);
    EXPECT_EQ(run.response.reasoning, c.expected.value("thinking", ""));
    EXPECT_EQ(run.response.content, c.expected.value("content", ""));
    EXPECT_EQ(run.response.tool_calls.size(), c.expected.value("tool_calls", Json::array()).size());
    EXPECT_JSON_EQ(run.response.message, c.expected);
  }
}

TEST(BuiltinTemplates, HermesMatchesGoldenFixtureTemplate) {
  const Json builtin = Json::parse(hermes_response_template_json());
  const GoldenCorpus& corpus = golden_corpus();
  auto golden = std::find_if(corpus.templates.begin(), corpus.templates.end(),
                             [](const GoldenTemplate& t) { return t.name == "hermes_builtin"; });
  ASSERT_NE(golden, corpus.templates.end());
  EXPECT_JSON_EQ(builtin, golden->spec);
}

TEST(BuiltinTemplates, TokenizerConfigSelection) {
  auto fallback = response_template_from_tokenizer_config_text(R"({"chat_template": "x"})",
                                                               "tokenizer_config.json");
  ASSERT_TRUE(fallback.ok());
  EXPECT_TRUE((*fallback)->field_index("tool_calls").has_value());
  auto shipped = response_template_from_tokenizer_config_text(
      R"({"response_template": {"start_anchor": "A:", "fields": {"answer": {"close": "<end>"}}}})",
      "cfg.json");
  ASSERT_TRUE(shipped.ok());
  ASSERT_EQ((*shipped)->fields.size(), 1u);
  EXPECT_EQ((*shipped)->fields[0].name, "answer");
  auto invalid = response_template_from_tokenizer_config_text(
      R"({"response_template": {"fields": {"a": {}}}})", "models/x/tokenizer_config.json");
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.error().message,
            "models/x/tokenizer_config.json: response_template: response_template must define "
            "'start_anchor' or 'start_anchor_pattern'.");
  EXPECT_FALSE(response_template_from_tokenizer_config_text("{not json", "cfg.json").ok());
}

}  // namespace
}  // namespace beam::server::testing
