// Prompt logprobs on models/tiny-beam: every scored position equals compute_logprobs of a direct
// forward over the whole prompt, whatever the chunking, the prefix cache, n or the start; a
// rollout's output logprobs come back when its prompt + output are scored; max_tokens 0 scores
// (or, without prompt logprobs, only computes the prompt) without generating; the logits rows a
// step may take bound the chunks; bad options are errors.
#include <gtest/gtest.h>

#include <random>

#include "engine_test_util.h"
#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"
#include "runtime/sampling/logprobs.h"

namespace beam::testing {
namespace {

class PromptLogprobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = engine_test_model("tiny-beam");
    ASSERT_NE(weights_, nullptr);
    vocab_ = weights_->config.vocab_size;
  }
  std::unique_ptr<Engine> make(int64_t step_tokens, bool prefix_cache = true) {
    EngineOptions o;
    o.block_size_tokens = 16;
    o.max_tokens_per_step = step_tokens;
    o.max_running = 32;
    o.kv_budget_bytes = 64 << 20;
    o.enable_prefix_cache = prefix_cache;
    o.num_threads = 2;
    auto e = Engine::create(weights_, o);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    return e.ok() ? std::move(*e) : nullptr;
  }
  // The logprobs of tokens[q] for q in [start, size) from one forward over all of tokens.
  std::vector<TokenLogprobs> direct(const std::vector<int32_t>& tokens, int64_t start,
                                    double temperature, int64_t num_top) {
    KernelContext ctx;
    ThreadPool pool(2);
    ctx.pool = &pool;
    BeamModel model(weights_, ctx);
    const auto T = static_cast<int64_t>(tokens.size());
    auto kv = LocalKvCache::create(ctx, weights_->config, 1, T);
    EXPECT_TRUE(kv.ok());
    ForwardBatch batch;
    batch.seqs.push_back(SeqChunk{tokens, 0, 0, kv->block_table(0), kv->block_table(0), true});
    ForwardOutput out;
    EXPECT_TRUE(model.forward(batch, kv->layers(), out).ok());
    std::vector<TokenLogprobs> lps;
    for (int64_t q = start; q < T; ++q)
      lps.push_back(
          compute_logprobs(out.row(q - 1), tokens[static_cast<size_t>(q)], temperature, num_top));
    return lps;
  }
  static void expect_equal(const std::vector<TokenLogprobs>& got,
                           const std::vector<TokenLogprobs>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].chosen.token, want[i].chosen.token) << what << " entry " << i;
      EXPECT_EQ(got[i].chosen.logprob, want[i].chosen.logprob) << what << " entry " << i;
      EXPECT_EQ(got[i].chosen_rank, want[i].chosen_rank) << what << " entry " << i;
      ASSERT_EQ(got[i].top.size(), want[i].top.size()) << what << " entry " << i;
      for (size_t j = 0; j < got[i].top.size(); ++j) {
        EXPECT_EQ(got[i].top[j].token, want[i].top[j].token) << what << " entry " << i;
        EXPECT_EQ(got[i].top[j].logprob, want[i].top[j].logprob) << what << " entry " << i;
      }
    }
  }
  Expected<RequestId> submit(Engine& e, std::vector<int32_t> prompt, SamplingParams params,
                             std::optional<PromptLogprobsOptions> opts, Collector& c) {
    GenerateRequest g;
    g.prompt = std::move(prompt);
    g.sampling = std::move(params);
    g.prompt_logprobs = opts;
    g.sink = c.sink();
    return e.submit(std::move(g));
  }
  std::shared_ptr<const BeamWeights> weights_;
  int64_t vocab_ = 0;
};

TEST_F(PromptLogprobsTest, EqualADirectForwardAcrossChunksCacheAndSiblings) {
  const std::vector<int32_t> prompt = tokens_of(70, 3, vocab_);
  const auto want = direct(prompt, 1, 1.0, 3);
  const auto want_tail = direct(prompt, 50, 1.0, 0);
  for (int64_t step : {7, 64, 512}) {
    auto engine = make(step);
    ASSERT_NE(engine, nullptr);
    // The whole prompt cached first: a scoring request may not reuse what it must score.
    ASSERT_EQ(run_all(*engine, {{prompt, greedy(1)}}).size(), 1u);
    SamplingParams two = greedy(3);
    two.n = 2;
    Collector whole, tail;
    ASSERT_TRUE(submit(*engine, prompt, two, PromptLogprobsOptions{1, 3}, whole).ok());
    ASSERT_TRUE(submit(*engine, prompt, greedy(2), PromptLogprobsOptions{50, 0}, tail).ok());
    engine->wait_idle();
    const std::string at = "step " + std::to_string(step);
    const auto siblings = whole.results();
    ASSERT_EQ(siblings.size(), 2u);
    for (const SiblingResult& r : siblings) {
      EXPECT_EQ(r.events_with_prompt_logprobs, 1) << at;
      EXPECT_EQ(r.usage.cached_prompt_tokens, 0) << at;
      expect_equal(r.prompt_logprobs, want, at);
      EXPECT_EQ(r.tokens.size(), 3u);
    }
    const SiblingResult t = tail.results().at(0);
    expect_equal(t.prompt_logprobs, want_tail, at + " from 50");
    // Positions before 49 may come from the cache (blocks of 16: 48 tokens).
    EXPECT_EQ(t.usage.cached_prompt_tokens, 48) << at;
    expect_pools_full(*engine);
  }
}

// PromptLogprobsOptions::token_ids (SGLang's input_token_ids_logprobs): every position gets the
// ids' logprobs in order, from the same row as its prompt token's (an id equal to the position's
// token has its logprob bit for bit), across chunks of 7; ids outside the vocabulary are refused.
TEST_F(PromptLogprobsTest, GivenTokenIdsAreScoredAtEveryPosition) {
  const std::vector<int32_t> prompt = tokens_of(40, 5, vocab_);
  auto engine = make(7);
  ASSERT_NE(engine, nullptr);
  Collector c;
  const std::vector<int32_t> ids = {prompt[10], 3};
  ASSERT_TRUE(submit(*engine, prompt, greedy(1), PromptLogprobsOptions{2, 1, ids}, c).ok());
  engine->wait_idle();
  const std::vector<TokenLogprobs> lp = c.results().at(0).prompt_logprobs;
  ASSERT_EQ(lp.size(), prompt.size() - 2);
  for (size_t i = 0; i < lp.size(); ++i) {
    ASSERT_EQ(lp[i].token_ids.size(), 2u) << "position " << i + 2;
    EXPECT_EQ(lp[i].token_ids[0].token, prompt[10]);
    EXPECT_EQ(lp[i].token_ids[1].token, 3);
    if (lp[i].chosen.token == prompt[10]) {
      EXPECT_EQ(lp[i].token_ids[0].logprob, lp[i].chosen.logprob) << "position " << i + 2;
    }
  }
  EXPECT_EQ(lp[8].token_ids[0].logprob, lp[8].chosen.logprob);  // position 10
  Collector bad;
  const auto refused = submit(*engine, prompt, greedy(1),
                                PromptLogprobsOptions{2, 0, {static_cast<int32_t>(vocab_)}}, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("outside the vocabulary"), std::string::npos);
}

TEST_F(PromptLogprobsTest, ScoringARolloutGivesItsOutputLogprobs) {
  auto engine = make(64);
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = tokens_of(20, 9, vocab_);
  for (double temperature : {0.0, 0.7}) {
    SamplingParams p = greedy(12);
    p.temperature = temperature;
    p.seed = 5;
    p.logprobs = true;
    p.top_logprobs = 2;
    const SiblingResult rollout = run_all(*engine, {{prompt, p}})[0][0];
    ASSERT_EQ(rollout.tokens.size(), 12u);
    std::vector<int32_t> both = prompt;
    both.insert(both.end(), rollout.tokens.begin(), rollout.tokens.end());
    SamplingParams score = p;
    score.max_tokens = 0;
    Collector c;
    ASSERT_TRUE(submit(*engine, both, score, PromptLogprobsOptions{20, 2}, c).ok());
    engine->wait_idle();
    const SiblingResult scored = c.results().at(0);
    EXPECT_TRUE(scored.tokens.empty());
    EXPECT_EQ(scored.finish, FinishReason::kLength);
    // Decode steps and a prefill compute the same logits on the CPU backend.
    expect_equal(scored.prompt_logprobs, rollout.logprobs, "T " + std::to_string(temperature));
  }
  expect_pools_full(*engine);
}

TEST_F(PromptLogprobsTest, MaxTokensZeroComputesThePromptOnlyForEverySibling) {
  auto engine = make(64);
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = tokens_of(33, 4, vocab_);
  SamplingParams p = greedy(0);
  p.n = 3;
  Collector c;
  ASSERT_TRUE(submit(*engine, prompt, p, PromptLogprobsOptions{1, 1}, c).ok());
  engine->wait_idle();
  const auto want = direct(prompt, 1, 1.0, 1);
  const auto siblings = c.results();
  ASSERT_EQ(siblings.size(), 3u);
  for (const SiblingResult& r : siblings) {
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_EQ(r.finish, FinishReason::kLength);
    EXPECT_EQ(r.num_events, 1);
    EXPECT_EQ(r.usage.completion_tokens, 0);
    expect_equal(r.prompt_logprobs, want, "n = 3");
  }
  // Without prompt logprobs, max_tokens 0 computes the prompt only (warming the prefix cache).
  const std::vector<int32_t> warm = tokens_of(40, 5, vocab_);
  Collector w;
  ASSERT_TRUE(submit(*engine, warm, greedy(0), std::nullopt, w).ok());
  engine->wait_idle();
  const SiblingResult warmed = w.results().at(0);
  EXPECT_TRUE(warmed.tokens.empty());
  EXPECT_EQ(warmed.finish, FinishReason::kLength);
  EXPECT_TRUE(warmed.prompt_logprobs.empty());
  EXPECT_EQ(run_all(*engine, {{warm, greedy(1)}})[0][0].usage.cached_prompt_tokens, 32);
  expect_pools_full(*engine);
}

// The logits rows a step may take (SchedulerConfig::max_logit_tokens_per_step, 512) cut a long
// prompt into chunks even under a larger step budget, and other requests still run beside it.
TEST_F(PromptLogprobsTest, LongPromptsScoreInBoundedChunks) {
  auto engine = make(2048);
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = tokens_of(1200, 8, vocab_);
  Collector scored, plain;
  ASSERT_TRUE(submit(*engine, prompt, greedy(2), PromptLogprobsOptions{1, 0}, scored).ok());
  ASSERT_TRUE(submit(*engine, tokens_of(900, 2, vocab_), greedy(2), std::nullopt, plain).ok());
  engine->wait_idle();
  EXPECT_GE(engine->stats().steps, 3);  // 1,199 scored rows need three steps of 512
  expect_equal(scored.results().at(0).prompt_logprobs, direct(prompt, 1, 1.0, 0), "1,200 tokens");
  EXPECT_EQ(plain.results().at(0).tokens.size(), 2u);
  EXPECT_TRUE(plain.results().at(0).prompt_logprobs.empty());
  expect_pools_full(*engine);
}

TEST_F(PromptLogprobsTest, BadOptionsAreErrors) {
  auto engine = make(64);
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = tokens_of(10, 1, vocab_);
  Collector c;
  auto expect_error = [&](SamplingParams p, std::optional<PromptLogprobsOptions> o,
                          const std::string& text) {
    auto id = submit(*engine, prompt, std::move(p), o, c);
    ASSERT_FALSE(id.ok()) << text;
    EXPECT_NE(id.error().message.find(text), std::string::npos) << id.error().message;
  };
  expect_error(greedy(1), PromptLogprobsOptions{0, 0}, "start 0");
  expect_error(greedy(1), PromptLogprobsOptions{11, 0}, "start 11");
  expect_error(greedy(1), PromptLogprobsOptions{1, 21}, "21 alternatives");
  SamplingParams negative = greedy(1);
  negative.max_tokens = -1;
  expect_error(negative, PromptLogprobsOptions{1, 0}, "max_tokens");
  // start = the prompt's length: nothing to score, an empty list.
  Collector empty;
  ASSERT_TRUE(submit(*engine, prompt, greedy(1), PromptLogprobsOptions{10, 0}, empty).ok());
  engine->wait_idle();
  EXPECT_TRUE(empty.results().at(0).prompt_logprobs.empty());
  EXPECT_EQ(empty.results().at(0).tokens.size(), 1u);
}

}  // namespace
}  // namespace beam::testing
