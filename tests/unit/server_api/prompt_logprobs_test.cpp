// Prompt logprobs on the server side, with the tiny-chat fixture tokenizer: the JSON writers
// (vLLM's prompt_logprobs, legacy echo logprobs, /generate's entries), SiblingDecoder passing the
// engine's prompt logprobs to the first delta and the result, and CompletionObserver's echo
// (whole responses and streams, a prompt list's choice numbering).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "recording_responder.h"
#include "server/api/exchange.h"
#include "server/generation/sibling_decoder.h"
#include "server/metrics/server_metrics.h"
#include "server/openai/completion_observer.h"
#include "server/openai/logprobs_json.h"
#include "tiny_chat_tokenizer.h"

namespace beam::server {
namespace {

std::string piece(int32_t id) {
  return tiny_chat_tokenizer().piece(id)->bytes;
}

constexpr int32_t kHello = 511;  // "Hello" in the fixture

TokenLogprobs entry(int32_t chosen, float logprob, int64_t rank, std::vector<TokenLogprob> top) {
  return TokenLogprobs{TokenLogprob{chosen, logprob}, rank, std::move(top), {}};
}

// Prompt [Hello, " a", "b"] scored from position 1: " a" ranks 3rd, "b" is the most likely.
struct Scored {
  std::vector<int32_t> prompt;
  std::vector<TokenLogprobs> entries;
  Scored() {
    const std::vector<int32_t> ab = tiny_chat_tokenizer().encode(" ab", false).value();
    prompt = {kHello};
    prompt.insert(prompt.end(), ab.begin(), ab.end());
    const int32_t a = prompt[1], b = prompt.back();
    entries.push_back(entry(a, -1.5f, 3, {{b, -0.5f}, {kHello, -1.0f}, {a, -1.5f}}));
    for (size_t p = 2; p < prompt.size(); ++p) {
      entries.push_back(
          entry(prompt[p], -0.25f, 1, {{prompt[p], -0.25f}, {a, -2.0f}, {kHello, -3.0f}}));
    }
  }
};

TEST(PromptLogprobsJson, VllmShapeHoldsThePromptTokenThenItsTopAlternatives) {
  Scored s;
  ASSERT_EQ(s.prompt.size(), 3u) << "the fixture spells \" ab\" in two tokens";
  const int32_t a = s.prompt[1], b = s.prompt[2];
  const Json j = vllm_prompt_logprobs(&tiny_chat_tokenizer(), s.prompt, 1, s.entries, 2);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_TRUE(j[0].is_null());
  // Position 1: the prompt token first (rank 3), then the top 2.
  const Json& p1 = j[1];
  ASSERT_EQ(p1.size(), 3u);
  auto it = p1.begin();
  EXPECT_EQ(it.key(), std::to_string(a));
  EXPECT_EQ(*it, (Json{{"logprob", -1.5}, {"rank", 3}, {"decoded_token", piece(a)}}));
  ++it;
  EXPECT_EQ(it.key(), std::to_string(b));
  EXPECT_EQ(*it, (Json{{"logprob", -0.5}, {"rank", 1}, {"decoded_token", piece(b)}}));
  ++it;
  EXPECT_EQ(it.key(), std::to_string(kHello));
  EXPECT_EQ(*it, (Json{{"logprob", -1.0}, {"rank", 2}, {"decoded_token", "Hello"}}));
  // Position 2: the prompt token is the most likely, so it appears once (rank 1).
  const Json& p2 = j[2];
  ASSERT_EQ(p2.size(), 2u);
  EXPECT_EQ(p2.begin().key(), std::to_string(b));
  EXPECT_EQ(p2[std::to_string(b)]["rank"], 1);
  EXPECT_EQ(p2[std::to_string(a)]["rank"], 2);
  // No alternatives: the prompt token alone; positions before `start` are null.
  const Json zero = vllm_prompt_logprobs(&tiny_chat_tokenizer(), s.prompt, 2, {s.entries[1]}, 0);
  EXPECT_EQ(zero,
            (Json::array({nullptr,
                          nullptr,
                          {{std::to_string(b),
                            {{"logprob", -0.25}, {"rank", 1}, {"decoded_token", piece(b)}}}}})));
}

TEST(PromptLogprobsJson, MinusInfinityIsWrittenAsOpenAiDoes) {
  const std::vector<int32_t> prompt = {kHello, kHello};
  const float inf = std::numeric_limits<float>::infinity();
  const Json j =
      vllm_prompt_logprobs(&tiny_chat_tokenizer(), prompt, 1, {entry(kHello, -inf, 512, {})}, 0);
  EXPECT_EQ(j[1][std::to_string(kHello)]["logprob"], -9999.0);
}

TEST(PromptLogprobsJson, LegacyEchoLogprobsCoverThePromptThenTheOutput) {
  Scored s;
  CompletionLogprobs b({&tiny_chat_tokenizer()}, 1);
  b.add_prompt(s.prompt, 1, s.entries);
  OutputToken out{kHello, entry(kHello, -0.75f, 2, {{s.prompt[1], -0.5f}}), std::nullopt, {}};
  b.add({out, OutputToken{kHello, std::nullopt, std::nullopt, {}}});  // a token without logprobs is left out
  const Json j = b.take();
  const size_t a_len = piece(s.prompt[1]).size(), b_len = piece(s.prompt[2]).size();
  EXPECT_EQ(j["tokens"], (Json::array({"Hello", piece(s.prompt[1]), piece(s.prompt[2]), "Hello"})));
  EXPECT_EQ(j["token_logprobs"], (Json::array({nullptr, -1.5, -0.25, -0.75})));
  EXPECT_EQ(j["top_logprobs"], (Json::array({nullptr,
                                             {{piece(s.prompt[2]), -0.5}},
                                             {{piece(s.prompt[2]), -0.25}},
                                             {{piece(s.prompt[1]), -0.5}}})));
  EXPECT_EQ(j["text_offset"], (Json::array({0, 5, 5 + a_len, 5 + a_len + b_len})));
  // take() starts the next part; offsets go on from the text already given.
  b.add({out});
  const Json next = b.take();
  EXPECT_EQ(next["tokens"], Json::array({"Hello"}));
  EXPECT_EQ(next["text_offset"], Json::array({10 + a_len + b_len}));
  // logprobs=0: no alternatives, so top_logprobs entries are null.
  CompletionLogprobs none({&tiny_chat_tokenizer()}, 0);
  none.add_prompt(s.prompt, 1, s.entries);
  EXPECT_EQ(none.take()["top_logprobs"], (Json::array({nullptr, nullptr, nullptr})));
}

TEST(PromptLogprobsJson, NativeEntriesFromTheStartPosition) {
  Scored s;
  const Json all = native_prompt_logprobs(3, 0, 1, s.entries, 1);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[0].is_null());
  EXPECT_EQ(
      all[1],
      (Json{{"token_id", s.prompt[1]},
            {"logprob", -1.5},
            {"rank", 3},
            {"top_logprobs", Json::array({{{"token_id", s.prompt[2]}, {"logprob", -0.5}}})}}));
  EXPECT_EQ(all[2]["token_id"], s.prompt[2]);
  EXPECT_EQ(all[2]["rank"], 1);
  // logprob_start_len 2: the engine scores from 2, the list starts there.
  const Json tail = native_prompt_logprobs(3, 2, 2, {s.entries[1]}, 0);
  EXPECT_EQ(tail, (Json::array({{{"token_id", s.prompt[2]},
                                 {"logprob", -0.25},
                                 {"rank", 1},
                                 {"top_logprobs", Json::array()}}})));
  EXPECT_EQ(native_logprob_entry(s.entries[0], 5)["top_logprobs"].size(), 3u);
}

TEST(PromptLogprobsDecoder, TheFirstEventsPromptLogprobsReachTheDeltaAndTheResult) {
  Scored s;
  GenerationSpec spec;
  spec.prompt_logprobs = PromptLogprobsOptions{1, 2};
  SiblingDecoder d(&tiny_chat_tokenizer(), spec, nullptr);
  TokenEvent first;
  first.tokens = {kHello};
  first.prompt_logprobs = s.entries;
  SiblingDelta d1;
  d.on_tokens(first, &d1);
  ASSERT_EQ(d1.prompt_logprobs.size(), 2u);
  EXPECT_EQ(d1.prompt_logprobs[0].chosen.token, s.prompt[1]);
  TokenEvent last;
  last.tokens = {kHello};
  last.finish = FinishReason::kLength;
  SiblingDelta d2;
  d.on_tokens(last, &d2);
  EXPECT_TRUE(d2.prompt_logprobs.empty());
  SiblingResult r = d.finish(&last, &d2);
  ASSERT_EQ(r.prompt_logprobs.size(), 2u);
  EXPECT_EQ(r.prompt_logprobs[1].chosen_rank, 1);
  EXPECT_EQ(r.parsed.content, "HelloHello");
}

// Score only (max_tokens 0): the one event has prompt logprobs and no tokens; the delta is not
// empty, so a stream still gets its first chunk.
TEST(PromptLogprobsDecoder, ScoreOnlyEventMakesANonEmptyDelta) {
  Scored s;
  GenerationSpec spec;
  spec.prompt_logprobs = PromptLogprobsOptions{1, 0};
  SiblingDecoder d(&tiny_chat_tokenizer(), spec, nullptr);
  TokenEvent only;
  only.prompt_logprobs = s.entries;
  only.finish = FinishReason::kLength;
  SiblingDelta delta;
  d.on_tokens(only, &delta);
  SiblingResult r = d.finish(&only, &delta);
  EXPECT_FALSE(delta.empty());
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_EQ(r.completion_tokens, 0);
  EXPECT_EQ(r.prompt_logprobs.size(), 2u);
}

struct ObserverFixture {
  ServerMetrics metrics;
  std::shared_ptr<RecordingResponder> responder = std::make_shared<RecordingResponder>();
  std::shared_ptr<Exchange> exchange = std::make_shared<Exchange>(
      http::HttpRequest{}, responder, "/v1/completions", ErrorFlavor::kOpenAi, &metrics);
  Scored s;

  // Two prompts (the scored one and [Hello]), n = 1, echo with logprobs=1.
  std::shared_ptr<CompletionObserver> observer(bool stream,
                                               std::optional<int64_t> prompt_logprobs) {
    CompletionResponseOptions o;
    o.id = "cmpl-test";
    o.model = "m";
    o.stream = stream;
    o.logprobs = 1;
    o.echo = true;
    o.prompt_logprobs = prompt_logprobs;
    o.prompts = {EchoedPrompt{s.prompt, "Hello ab"}, EchoedPrompt{{kHello}, "Hello"}};
    return std::make_shared<CompletionObserver>(exchange, &tiny_chat_tokenizer(), std::move(o));
  }
  SiblingResult result(int32_t token, bool with_prompt) const {
    SiblingResult r;
    r.reason = FinishReason::kLength;
    r.parsed.content = piece(token);
    r.tokens = {OutputToken{token, entry(token, -0.125f, 1, {{token, -0.125f}}), std::nullopt, {}}};
    r.completion_tokens = 1;
    if (with_prompt) r.prompt_logprobs = s.entries;
    return r;
  }
  std::vector<Json> data_events() const {
    std::vector<Json> out;
    for (const std::string& c : responder->chunks) {
      if (c.rfind("data: {", 0) == 0) out.push_back(Json::parse(c.substr(6)));
    }
    return out;
  }
};

TEST(CompletionEcho, WholeResponseEchoesEachPromptBeforeItsOutput) {
  ObserverFixture f;
  auto o = f.observer(/*stream=*/false, 1);
  o->on_sibling_done(1, f.result(kHello, false));  // a one-token prompt has no scored position
  o->on_sibling_done(0, f.result(kHello, true));
  GenerationUsage usage{4, 0, 2};
  o->on_complete(usage);
  ASSERT_EQ(f.responder->status, 200);
  const Json body = Json::parse(f.responder->chunks.at(0));
  const Json& c0 = body["choices"][0];
  EXPECT_EQ(c0["index"], 0);
  EXPECT_EQ(c0["text"], "Hello abHello");
  EXPECT_EQ(c0["logprobs"]["tokens"].size(), 4u);
  EXPECT_EQ(c0["logprobs"]["token_logprobs"], (Json::array({nullptr, -1.5, -0.25, -0.125})));
  EXPECT_EQ(c0["logprobs"]["text_offset"][3], 8);  // the output starts after "Hello ab"
  EXPECT_EQ(c0["prompt_logprobs"].size(), 3u);
  EXPECT_TRUE(c0["prompt_logprobs"][0].is_null());
  EXPECT_EQ(c0["prompt_logprobs"][1].size(), 2u);  // the prompt token and the top 1
  EXPECT_EQ(c0["finish_reason"], "length");
  const Json& c1 = body["choices"][1];
  EXPECT_EQ(c1["index"], 1);
  EXPECT_EQ(c1["text"], "HelloHello");
  EXPECT_EQ(c1["logprobs"]["token_logprobs"], (Json::array({nullptr, -0.125})));
  EXPECT_EQ(c1["prompt_logprobs"], Json::array({nullptr}));
  EXPECT_EQ(body["usage"]["prompt_tokens"], 4);
}

TEST(CompletionEcho, AStreamedChoicesFirstChunkCarriesThePrompt) {
  ObserverFixture f;
  auto o = f.observer(/*stream=*/true, std::nullopt);
  SiblingDelta first;
  first.prompt_logprobs = f.s.entries;
  ResponseDelta text;
  text.kind = ResponseDelta::Kind::kContent;
  text.text = "Hello";
  first.parts.push_back(text);
  first.tokens = f.result(kHello, false).tokens;
  o->on_delta(0, std::move(first));
  SiblingDelta second;
  second.parts.push_back(text);
  second.tokens = f.result(kHello, false).tokens;
  o->on_delta(0, std::move(second));
  o->on_sibling_done(0, f.result(kHello, true));
  // Choice 1 ends without a delta: its finish chunk is its first and echoes the prompt.
  o->on_sibling_done(1, f.result(kHello, false));
  o->on_complete(GenerationUsage{4, 0, 3});
  const std::vector<Json> ev = f.data_events();
  ASSERT_EQ(ev.size(), 4u);
  const Json& c0 = ev[0]["choices"][0];
  EXPECT_EQ(c0["text"], "Hello abHello");
  EXPECT_EQ(c0["logprobs"]["token_logprobs"], (Json::array({nullptr, -1.5, -0.25, -0.125})));
  EXPECT_FALSE(c0.contains("prompt_logprobs"));  // not asked for
  const Json& c0b = ev[1]["choices"][0];
  EXPECT_EQ(c0b["text"], "Hello");
  EXPECT_EQ(c0b["logprobs"]["token_logprobs"], Json::array({-0.125}));
  EXPECT_EQ(c0b["logprobs"]["text_offset"], Json::array({13}));
  EXPECT_EQ(ev[2]["choices"][0]["text"], "");
  EXPECT_EQ(ev[2]["choices"][0]["finish_reason"], "length");
  const Json& c1 = ev[3]["choices"][0];
  EXPECT_EQ(c1["index"], 1);
  EXPECT_EQ(c1["text"], "Hello");
  EXPECT_EQ(c1["logprobs"]["token_logprobs"], Json::array({nullptr}));
  EXPECT_EQ(c1["finish_reason"], "length");
}

}  // namespace
}  // namespace beam::server
