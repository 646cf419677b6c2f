// SiblingDecoder with the tiny-chat fixture tokenizer: the output does not depend on how tokens
// are grouped into events; stop strings cut text, ids and logprobs at the same place; stop ids
// are not shown as text; reasoning and tool calls come out of the response_template.
#include "server/generation/sibling_decoder.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "server/parsers/builtin_templates.h"
#include "tiny_chat_tokenizer.h"

namespace beam::server {
namespace {

std::vector<int32_t> encode(const std::string& s) {
  return tiny_chat_tokenizer().encode(s, true).value();
}

struct Output {
  std::string reasoning, content;
  std::vector<ResponseDelta> parts;
  std::vector<OutputToken> streamed_tokens;
  SiblingResult result;
};

// Feeds `ids` in events of the given sizes; the last event carries the finish (stop_token when set).
Output run(const GenerationSpec& spec, const std::vector<int32_t>& ids, const std::vector<size_t>& sizes,
           std::optional<int32_t> stop_token = std::nullopt, FinishReason reason = FinishReason::kLength) {
  std::shared_ptr<const ResponseTemplate> tmpl = load_hermes_response_template().value();
  SiblingDecoder d(&tiny_chat_tokenizer(), spec, tmpl);
  Output out;
  size_t pos = 0, e = 0;
  auto collect = [&](SiblingDelta& delta) {
    for (ResponseDelta& p : delta.parts) {
      if (p.kind == ResponseDelta::Kind::kReasoning) out.reasoning += p.text;
      if (p.kind == ResponseDelta::Kind::kContent) out.content += p.text;
      out.parts.push_back(p);
    }
    for (OutputToken& t : delta.tokens) out.streamed_tokens.push_back(t);
  };
  while (pos < ids.size() && !d.done()) {
    size_t n = std::min(sizes[e++ % sizes.size()], ids.size() - pos);
    TokenEvent ev;
    ev.tokens.assign(ids.begin() + static_cast<std::ptrdiff_t>(pos), ids.begin() + static_cast<std::ptrdiff_t>(pos + n));
    for (int32_t id : ev.tokens) ev.logprobs.push_back(TokenLogprobs{TokenLogprob{id, -0.5f}, 1, {}, {}});
    pos += n;
    const bool last = pos == ids.size();
    if (last) {
      ev.finish = reason;
      ev.stop_token = stop_token;
    }
    SiblingDelta delta;
    d.on_tokens(ev, &delta);
    if (d.stopped_by_string()) {
      out.result = d.finish(nullptr, &delta);
    } else if (last) {
      out.result = d.finish(&ev, &delta);
    }
    collect(delta);
  }
  return out;
}

GenerationSpec plain_spec() {
  GenerationSpec s;
  s.parse_output = false;
  return s;
}

TEST(SiblingDecoder, EventGroupingDoesNotChangeTheOutput) {
  const std::string text = "Hello, the weather in Paris is sunny: caf\xc3\xa9 \xe2\x82\xac 100.";
  const std::vector<int32_t> ids = encode(text);
  ASSERT_GT(ids.size(), 8u);
  Output one = run(plain_spec(), ids, {1});
  EXPECT_EQ(one.content, text);
  EXPECT_EQ(one.result.parsed.content, text);
  EXPECT_EQ(one.result.completion_tokens, static_cast<int64_t>(ids.size()));
  EXPECT_EQ(one.streamed_tokens.size(), ids.size());
  for (const std::vector<size_t>& sizes : std::vector<std::vector<size_t>>{{2}, {3, 1}, {5}, {100}, {1, 4, 2}}) {
    Output o = run(plain_spec(), ids, sizes);
    EXPECT_EQ(o.content, text);
    ASSERT_EQ(o.streamed_tokens.size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(o.streamed_tokens[i].id, ids[i]);
  }
}

TEST(SiblingDecoder, TokensAreReleasedWithTheirText) {
  // Byte tokens of "é" (0xC3 0xA9 → ids 3 + byte): the first alone releases no text, so its token
  // is held back until the character is complete.
  GenerationSpec spec = plain_spec();
  SiblingDecoder d(&tiny_chat_tokenizer(), spec, nullptr);
  TokenEvent first;
  first.tokens = {3 + 0xC3};
  SiblingDelta delta;
  d.on_tokens(first, &delta);
  EXPECT_TRUE(delta.tokens.empty());
  EXPECT_TRUE(delta.parts.empty());
  TokenEvent second;
  second.tokens = {3 + 0xA9};
  d.on_tokens(second, &delta);
  ASSERT_EQ(delta.tokens.size(), 2u);
  ASSERT_EQ(delta.parts.size(), 1u);
  EXPECT_EQ(delta.parts[0].text, "\xc3\xa9");
}

TEST(SiblingDecoder, StopStringCutsTextIdsAndLogprobsTogether) {
  GenerationSpec spec = plain_spec();
  spec.stop_strings = {" in P"};
  const std::string text = "The weather in Paris is sunny.";
  const std::vector<int32_t> ids = encode(text);
  for (const std::vector<size_t>& sizes : std::vector<std::vector<size_t>>{{1}, {2}, {3}, {100}}) {
    Output o = run(spec, ids, sizes);
    EXPECT_EQ(o.content, "The weather");
    EXPECT_EQ(o.result.parsed.content, "The weather");
    ASSERT_TRUE(o.result.stop_string);
    EXPECT_EQ(o.result.reason, FinishReason::kStop);
    // Kept tokens decode to text that starts with the returned text and holds no more than the
    // token that straddles the stop.
    std::vector<int32_t> kept;
    for (const OutputToken& t : o.result.tokens) kept.push_back(t.id);
    EXPECT_EQ(o.result.completion_tokens, static_cast<int64_t>(kept.size()));
    ASSERT_EQ(o.streamed_tokens.size(), kept.size());
    const std::string kept_text = tiny_chat_tokenizer().decode(kept, false).value();
    EXPECT_EQ(kept_text.rfind("The weather", 0), 0u);
    EXPECT_LT(kept_text.size(), std::string("The weather in P").size());
    std::vector<int32_t> without_last(kept.begin(), kept.end() - 1);
    EXPECT_LT(tiny_chat_tokenizer().decode(without_last, false).value().size(),
              std::string("The weather").size());
  }
}

TEST(SiblingDecoder, StopTokenTextIsNotShown) {
  GenerationSpec spec = plain_spec();
  std::vector<int32_t> ids = encode("Hi");
  const int32_t stop = 3 + 'X';
  ids.push_back(stop);
  Output o = run(spec, ids, {1}, stop, FinishReason::kStop);
  EXPECT_EQ(o.content, "Hi");
  EXPECT_EQ(o.result.stop_token, stop);
  EXPECT_EQ(o.result.completion_tokens, static_cast<int64_t>(ids.size()));  // the stop id is counted
  spec.include_stop_str_in_output = true;
  EXPECT_EQ(run(spec, ids, {1}, stop, FinishReason::kStop).content, "HiX");
}

TEST(SiblingDecoder, ReasoningAndToolCallsFromTheResponseTemplate) {
  GenerationSpec spec;
  spec.parse_output = true;
  spec.prompt_text = "<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n";
  spec.tool_call_id_prefix = "call_x_";
  const std::vector<int32_t> ids = {510, 509, 2};  // think+answer, the tool call, <|im_end|>
  for (const std::vector<size_t>& sizes : std::vector<std::vector<size_t>>{{1}, {3}}) {
    Output o = run(spec, ids, sizes, 2, FinishReason::kStop);
    EXPECT_EQ(o.reasoning, "The user asks about the weather.");
    EXPECT_EQ(o.content, "It is sunny in Paris.");
    ASSERT_EQ(o.result.parsed.tool_calls.size(), 1u);
    EXPECT_EQ(o.result.parsed.tool_calls[0].name, "get_weather");
    EXPECT_EQ(Json::parse(o.result.parsed.tool_calls[0].arguments), Json::parse(R"({"city": "Paris"})"));
    EXPECT_EQ(o.result.parsed.tool_calls[0].id.rfind("call_x_", 0), 0u);
    bool saw_start = false;
    for (const ResponseDelta& p : o.parts) saw_start |= p.kind == ResponseDelta::Kind::kToolCallStart;
    EXPECT_TRUE(saw_start);
  }
}

TEST(SiblingDecoder, ToolChoiceNoneReturnsCallTextAsContent) {
  GenerationSpec spec;
  spec.parse_output = true;
  spec.parse_tool_calls = false;
  spec.prompt_text = "<|im_start|>assistant\n";
  Output o = run(spec, {509}, {1}, std::nullopt, FinishReason::kLength);
  EXPECT_TRUE(o.result.parsed.tool_calls.empty());
  EXPECT_NE(o.content.find("get_weather"), std::string::npos);
}

TEST(SiblingDecoder, SpecialDelimiterTokensReachTheParser) {
  // The fixture with <think> / </think> (505, 506) marked special, as beam-nano ships them.
  std::ifstream in(std::string(BEAMSERVE_SOURCE_DIR) + "/tests/server/fixtures/tiny-chat/tokenizer.json");
  std::stringstream text;
  text << in.rdbuf();
  Json doc = Json::parse(text.str());
  for (Json& t : doc["added_tokens"])
    if (t["id"] == 505 || t["id"] == 506) t["special"] = true;
  text::Tokenizer tok = text::Tokenizer::from_json(doc.dump(), "").value();
  ASSERT_TRUE(tok.piece(505)->special);
  const std::vector<int32_t> plan = tok.encode("plan", false).value();
  const std::vector<int32_t> answer = tok.encode("answer", false).value();
  std::vector<int32_t> ids = {505};
  ids.insert(ids.end(), plan.begin(), plan.end());
  ids.push_back(506);
  ids.insert(ids.end(), answer.begin(), answer.end());
  GenerationSpec spec;
  spec.parse_output = true;
  spec.prompt_text = "<|im_start|>assistant\n";
  auto run_with = [&](std::vector<int32_t> shown) {
    spec.shown_special_ids = std::move(shown);
    SiblingDecoder d(&tok, spec, load_hermes_response_template().value());
    TokenEvent ev;
    ev.tokens = ids;
    ev.finish = FinishReason::kLength;
    SiblingDelta delta;
    d.on_tokens(ev, &delta);
    return d.finish(&ev, &delta).parsed;
  };
  ParsedResponse kept = run_with({505, 506});
  EXPECT_EQ(kept.reasoning, "plan");
  EXPECT_EQ(kept.content, "answer");
  ParsedResponse skipped = run_with({});  // special tokens hidden: the parser never sees <think>
  EXPECT_EQ(skipped.reasoning, "");
  EXPECT_EQ(skipped.content, "plananswer");
}

}  // namespace
}  // namespace beam::server
