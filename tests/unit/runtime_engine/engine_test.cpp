// Engine behaviour on models/tiny-beam: batched = unbatched (greedy tokens identical alone, among
// 15 others, with prefix hits, with chunk budgets 1/7/64, after preemption), prefix-cache reuse,
// sliding-window release, n > 1, seeds, cancel, the step budget's default and checks, and full
// pools after every test.
#include <gtest/gtest.h>

#include <random>

#include "engine_test_util.h"
#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"
#include "runtime/engine_device.h"
#include "runtime/kv_cache/kv_geometry.h"

namespace beam::testing {
namespace {

// Every token a request's model read: the prompt, then each output token but the last.
std::vector<int32_t> tokens_read(std::vector<int32_t> prompt, const std::vector<int32_t>& output) {
  if (!output.empty()) prompt.insert(prompt.end(), output.begin(), output.end() - 1);
  return prompt;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = engine_test_model("tiny-beam");
    ASSERT_NE(weights_, nullptr);
    vocab_ = weights_->config.vocab_size;
  }
  std::unique_ptr<Engine> make(EngineOptions o) {
    o.num_threads = 2;
    auto e = Engine::create(weights_, o);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    return e.ok() ? std::move(*e) : nullptr;
  }
  EngineOptions small_options(int64_t step_tokens = 64) {
    EngineOptions o;
    o.block_size_tokens = 16;
    o.max_tokens_per_step = step_tokens;
    o.max_running = 32;
    o.kv_budget_bytes = 64 << 20;
    return o;
  }
  // 16 requests of different lengths; the first two share a 40-token prefix.
  std::vector<RunRequest> sixteen_requests() {
    std::vector<RunRequest> reqs;
    auto shared = tokens_of(40, 999, vocab_);
    for (int i = 0; i < 16; ++i) {
      RunRequest r;
      r.prompt = tokens_of(3 + 7 * i, 100 + i, vocab_);
      if (i < 2) r.prompt.insert(r.prompt.begin(), shared.begin(), shared.end());
      r.params = greedy(12 + i % 5);
      reqs.push_back(r);
    }
    return reqs;
  }
  // A routing record's positions [from, T) equal a direct forward's over `read` (T tokens).
  void expect_routing_of_direct_forward(const std::vector<int32_t>& read,
                                        const std::vector<int32_t>& record, int64_t from) {
    const BeamConfig& c = weights_->config;
    const int64_t layers = c.num_layers_of(MlpKind::kSparse), k = c.num_experts_per_tok;
    const auto T = static_cast<int64_t>(read.size());
    ASSERT_EQ(static_cast<int64_t>(record.size()), (T - from) * layers * k);
    ThreadPool pool(2);
    KernelContext ctx;
    ctx.pool = &pool;
    BeamModel model(weights_, ctx);
    auto kv = LocalKvCache::create(ctx, c, 1, T);
    ASSERT_TRUE(kv.ok());
    ForwardBatch batch;
    batch.capture_routing = true;
    batch.seqs.push_back(SeqChunk{read, 0, 0, kv->block_table(0), kv->block_table(0), false});
    ForwardOutput out;
    ASSERT_TRUE(model.forward(batch, kv->layers(), out).ok());
    for (int64_t t = from; t < T; ++t)
      for (int64_t l = 0; l < layers; ++l)
        for (int64_t j = 0; j < k; ++j)
          ASSERT_EQ(record[static_cast<size_t>(((t - from) * layers + l) * k + j)],
                    out.routed_experts[static_cast<size_t>((l * T + t) * k + j)])
              << "position " << t << " layer " << l;
  }
  // A hidden-states record of positions [from, T) equals a direct forward's over `read` (T
  // tokens) with logits for every token (each state then the normed row of a logit row), bit for
  // bit.
  void expect_hidden_states_of_direct_forward(const std::vector<int32_t>& read,
                                              const std::vector<uint16_t>& record,
                                              int64_t from = 0) {
    const BeamConfig& c = weights_->config;
    const auto T = static_cast<int64_t>(read.size());
    ASSERT_EQ(static_cast<int64_t>(record.size()), (T - from) * c.hidden_size);
    ThreadPool pool(2);
    KernelContext ctx;
    ctx.pool = &pool;
    BeamModel model(weights_, ctx);
    auto kv = LocalKvCache::create(ctx, c, 1, T);
    ASSERT_TRUE(kv.ok());
    ForwardBatch batch;
    batch.seqs.push_back(SeqChunk{read, 0, 0, kv->block_table(0), kv->block_table(0), true});
    batch.seqs[0].final_hidden_from = 0;
    ForwardOutput out;
    ASSERT_TRUE(model.forward(batch, kv->layers(), out).ok());
    ASSERT_EQ(static_cast<int64_t>(out.final_hidden.size()), T * c.hidden_size);
    for (int64_t t = from; t < T; ++t)
      for (int64_t i = 0; i < c.hidden_size; ++i)
        ASSERT_EQ(record[static_cast<size_t>((t - from) * c.hidden_size + i)],
                  out.final_hidden[static_cast<size_t>(t * c.hidden_size + i)])
            << "position " << t << " element " << i;
  }
  std::shared_ptr<const BeamWeights> weights_;
  int64_t vocab_ = 0;
};

TEST_F(EngineTest, BatchedEqualsUnbatchedAcrossChunkSizes) {
  auto reqs = sixteen_requests();
  // Reference: each request alone on a fresh engine with prefix caching off.
  std::vector<std::vector<int32_t>> alone;
  {
    EngineOptions o = small_options();
    o.enable_prefix_cache = false;
    auto e = make(o);
    for (const auto& r : reqs) alone.push_back(run_all(*e, {r})[0][0].tokens);
    expect_pools_full(*e);
  }
  for (int64_t chunk : {1, 7, 64}) {
    auto e = make(small_options(chunk));
    // Warm the prefix cache with the shared prefix so request 1 hits it in the batch.
    run_all(*e, {reqs[0]});
    auto results = run_all(*e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_EQ(results[i].size(), 1u);
      EXPECT_EQ(results[i][0].tokens, alone[i]) << "request " << i << " with step budget " << chunk;
      EXPECT_EQ(results[i][0].finish, FinishReason::kLength);
    }
    EXPECT_GT(results[1][0].usage.cached_prompt_tokens, 0) << "shared prefix should hit";
    expect_pools_full(*e);
  }
}

TEST_F(EngineTest, PreemptedRequestsResumeWithIdenticalTokens) {
  auto reqs = sixteen_requests();
  for (auto& r : reqs) r.params.max_tokens = 48;  // decode growth outruns the admission headroom
  std::vector<std::vector<int32_t>> alone;
  {
    auto e = make(small_options());
    for (const auto& r : reqs) alone.push_back(run_all(*e, {r})[0][0].tokens);
  }
  EngineOptions o = small_options();
  // Just enough KV for a few sequences at a time: forces preemption and resume.
  KvGeometry g = *kv_geometry_from_config(weights_->config, o.block_size_tokens);
  o.max_running = 8;
  o.kv_budget_bytes = 24 * g.bytes_per_block(AttentionKind::kFull) +
                      (8 * 3 + 4) * g.bytes_per_block(AttentionKind::kSliding);
  auto e = make(o);
  auto results = run_all(*e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(results[i][0].tokens, alone[i]) << "request " << i;
  EXPECT_GT(e->stats().preemptions, 0) << "the small pool should have forced preemption";
  expect_pools_full(*e);
}

TEST_F(EngineTest, PrefixHitGivesSameTokensAndCountsCachedTokens) {
  auto e = make(small_options());
  RunRequest r{tokens_of(100, 5, vocab_), greedy(20)};
  auto first = run_all(*e, {r})[0][0];
  auto second = run_all(*e, {r})[0][0];
  EXPECT_EQ(first.usage.cached_prompt_tokens, 0);
  EXPECT_EQ(second.usage.cached_prompt_tokens, 96);  // block-aligned, last token recomputed
  EXPECT_EQ(first.tokens, second.tokens);
  expect_pools_full(*e);
}

TEST_F(EngineTest, SlidingPoolUsageStaysBoundedOverLongGenerations) {
  EngineOptions o = small_options();
  auto e = make(o);
  // 10× the window of 16 tokens; the sliding pool must not grow with the context.
  RunRequest r{tokens_of(8, 6, vocab_), greedy(160)};
  Collector c;
  GenerateRequest g{r.prompt, r.params, 0, c.sink()};
  ASSERT_TRUE(e->submit(std::move(g)).ok());
  int64_t max_sliding_used = 0;
  while (true) {
    EngineStats s = e->stats();
    // Blocks the sequence holds: neither free nor merely cached (evictable) by the prefix cache.
    max_sliding_used = std::max(max_sliding_used, s.sliding_pool.total_blocks - s.sliding_pool.free_blocks -
                                                      s.sliding_pool.cached_blocks);
    if (!c.results().empty() && c.results()[0].finish) break;
    std::this_thread::yield();
  }
  e->wait_idle();
  // window 16 / block 16: at most window + one block + the step's chunk, never ~168/16 blocks.
  EXPECT_LE(max_sliding_used, 4);
  EXPECT_EQ(c.results()[0].tokens.size(), 160u);
  expect_pools_full(*e);
}

// A reasoning budget's end tokens come right after its budget (greedy and sampled siblings,
// batched); without the budget the same greedy output differs there.
TEST_F(EngineTest, ReasoningBudgetsForceTheirEndTokens) {
  auto engine = make(small_options());
  ASSERT_NE(engine, nullptr);
  const ReasoningBudget budget = test_reasoning_budget(6);
  const auto reqs = reasoning_budget_requests(budget, vocab_);
  const auto results = run_all(*engine, reqs);
  for (const auto& request : results)
    for (const SiblingResult& s : request) expect_reasoning_budget_kept(s.tokens, budget);
  RunRequest free = reqs[0];
  free.params.reasoning_budget.reset();
  EXPECT_NE(run_all(*engine, {free})[0][0].tokens, results[0][0].tokens);
  expect_pools_full(*engine);
}

TEST_F(EngineTest, SeededSamplingIsReproducibleAndSiblingsDiffer) {
  auto e = make(small_options());
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 1234;
  p.max_tokens = 16;
  p.n = 3;
  p.ignore_eos = true;
  RunRequest r{tokens_of(30, 7, vocab_), p};
  auto a = run_all(*e, {r})[0];
  auto b = run_all(*e, {r, RunRequest{tokens_of(50, 8, vocab_), greedy(10)}})[0];
  ASSERT_EQ(a.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a[i].tokens, b[i].tokens) << "sibling " << i;
  EXPECT_NE(a[0].tokens, a[1].tokens);
  EXPECT_NE(a[1].tokens, a[2].tokens);
  expect_pools_full(*e);
}

TEST_F(EngineTest, CancelReleasesEverything) {
  auto e = make(small_options());
  Collector c;
  GenerateRequest g{tokens_of(60, 9, vocab_), greedy(100000), 0, c.sink()};
  g.sampling.max_tokens.reset();
  auto id = e->submit(std::move(g));
  ASSERT_TRUE(id.ok());
  while (c.results().empty() || c.results()[0].tokens.size() < 5) std::this_thread::yield();
  e->cancel(*id);
  e->cancel(*id);  // idempotent
  e->wait_idle();
  ASSERT_EQ(c.results().size(), 1u);
  EXPECT_EQ(c.results()[0].finish, FinishReason::kCancelled);
  expect_pools_full(*e);
}

TEST_F(EngineTest, LogprobsArriveWithTokens) {
  auto e = make(small_options());
  SamplingParams p = greedy(5);
  p.logprobs = true;
  p.top_logprobs = 3;
  auto r = run_all(*e, {RunRequest{tokens_of(10, 10, vocab_), p}})[0][0];
  ASSERT_EQ(r.logprobs.size(), r.tokens.size());
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    EXPECT_EQ(r.logprobs[i].chosen.token, r.tokens[i]);
    ASSERT_EQ(r.logprobs[i].top.size(), 3u);
    EXPECT_EQ(r.logprobs[i].top[0].token, r.tokens[i]);  // greedy picks the most likely
  }
}

// return_entropy: one entropy a token, in [0, log vocab], with or without logprobs; none unasked;
// token_ids_logprob: the ids' logprobs at every token, in the ids' order.
TEST_F(EngineTest, EntropiesArriveWithTokens) {
  auto e = make(small_options());
  SamplingParams p = greedy(6);
  p.return_entropy = true;
  SamplingParams sampled = p;
  sampled.temperature = 0.8;
  sampled.seed = 3;
  sampled.logprobs = true;
  sampled.token_ids_logprob = {3, 9};
  const auto results = run_all(*e, {RunRequest{tokens_of(10, 10, vocab_), p},
                                    RunRequest{tokens_of(12, 11, vocab_), sampled},
                                    RunRequest{tokens_of(10, 10, vocab_), greedy(6)}});
  for (int i = 0; i < 2; ++i) {
    const SiblingResult& r = results[static_cast<size_t>(i)][0];
    ASSERT_EQ(r.entropies.size(), r.tokens.size()) << "request " << i;
    for (float h : r.entropies) {
      EXPECT_GT(h, 0.0f);
      EXPECT_LE(h, std::log(static_cast<float>(vocab_)) + 1e-4f);
    }
  }
  EXPECT_TRUE(results[0][0].logprobs.empty());
  const SiblingResult& s = results[1][0];
  EXPECT_EQ(s.logprobs.size(), s.tokens.size());
  ASSERT_EQ(s.token_ids_logprobs.size(), s.tokens.size());
  for (const auto& ids : s.token_ids_logprobs) {
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_EQ(ids[0].token, 3);
    EXPECT_EQ(ids[1].token, 9);
    EXPECT_LT(ids[0].logprob, 0.0f);
  }
  EXPECT_TRUE(results[2][0].entropies.empty());
  EXPECT_TRUE(results[2][0].token_ids_logprobs.empty());
  EXPECT_EQ(results[2][0].tokens, results[0][0].tokens);  // asking changes no token
}

TEST_F(EngineTest, RejectsInvalidRequests) {
  auto e = make(small_options());
  GenerateRequest empty;
  auto a = e->submit(std::move(empty));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("prompt"), std::string::npos);
  GenerateRequest bad;
  bad.prompt = {1, 2, static_cast<int32_t>(vocab_)};
  auto b = e->submit(std::move(bad));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("outside the vocabulary"), std::string::npos);
  GenerateRequest temp;
  temp.prompt = {1};
  temp.sampling.temperature = -1;
  auto c = e->submit(std::move(temp));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("temperature"), std::string::npos);
}

// vLLM's rule: 8192 tokens a step on CUDA devices of >= 70 GiB (H100, H200), 2048 elsewhere.
TEST(EngineDefaults, MaxTokensPerStepFollowsTheDevice) {
  const int64_t gib = int64_t{1} << 30;
  EXPECT_EQ(default_max_tokens_per_step(Device::kCpu, 0), 2048);
  EXPECT_EQ(default_max_tokens_per_step(Device::kCpu, 512 * gib), 2048);
  EXPECT_EQ(default_max_tokens_per_step(Device::kCuda, int64_t{150'110'011'392}), 8192);  // H200
  EXPECT_EQ(default_max_tokens_per_step(Device::kCuda, int64_t{85'031'714'816}), 8192);   // H100
  EXPECT_EQ(default_max_tokens_per_step(Device::kCuda, 70 * gib), 8192);
  EXPECT_EQ(default_max_tokens_per_step(Device::kCuda, 70 * gib - 1), 2048);
  EXPECT_EQ(default_max_tokens_per_step(Device::kCuda, 48 * gib), 2048);
}

// The routed experts of every position a routing request's model read, for each sibling, equal a
// direct forward of that sequence with capture_routing, even when the prompt is in the prefix cache
// (it is computed again) and the steps are chunked (7 tokens) and batched with another request.
TEST_F(EngineTest, RoutedExpertsOfEveryPositionEqualADirectForward) {
  auto engine = make(small_options(7));
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = tokens_of(30, 5, vocab_);
  ASSERT_EQ(run_all(*engine, {{prompt, greedy(2)}}).size(), 1u);  // the prompt is now cached
  SamplingParams sampled = greedy(5);
  sampled.temperature = 1;
  sampled.seed = 11;
  sampled.n = 2;
  Collector routed, plain, one_token;
  GenerateRequest a;
  a.prompt = prompt;
  a.sampling = sampled;
  a.return_routed_experts = true;
  a.sink = routed.sink();
  GenerateRequest b;
  b.prompt = prompt;
  b.sampling = greedy(4);
  b.sink = plain.sink();
  // n = 2 whose prompt owner finishes at its first sample, before its sibling forks.
  GenerateRequest first_only;
  first_only.prompt = prompt;
  first_only.sampling = sampled;
  first_only.sampling.max_tokens = 1;
  first_only.return_routed_experts = true;
  first_only.sink = one_token.sink();
  ASSERT_TRUE(engine->submit(std::move(a)).ok());
  ASSERT_TRUE(engine->submit(std::move(b)).ok());
  ASSERT_TRUE(engine->submit(std::move(first_only)).ok());
  engine->wait_idle();
  std::vector<SiblingResult> siblings = routed.results();
  ASSERT_EQ(siblings.size(), 2u);
  EXPECT_NE(siblings[0].tokens, siblings[1].tokens);
  for (SiblingResult& r : one_token.results()) {
    ASSERT_EQ(r.tokens.size(), 1u);
    siblings.push_back(std::move(r));
  }
  ASSERT_EQ(siblings.size(), 4u);
  for (const SiblingResult& r : siblings) {
    EXPECT_EQ(r.usage.cached_prompt_tokens, 0);  // no prefix reuse for a routing request
    expect_routing_of_direct_forward(tokens_read(prompt, r.tokens), r.routed_experts, 0);
  }
  EXPECT_TRUE(plain.results()[0].routed_experts.empty());
  EXPECT_GT(plain.results()[0].usage.cached_prompt_tokens, 0);
  engine->flush_prefix_cache();
  expect_pools_full(*engine);
}

// The final hidden states of every position a request's model read, for each sibling, equal a
// direct forward's: the prompt is computed again though cached, in 7-token chunks (the final norm
// of every row, one of them a logit row) batched with another request, then decoded.
TEST_F(EngineTest, HiddenStatesOfEveryPositionEqualADirectForward) {
  auto engine = make(small_options(7));
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = tokens_of(30, 15, vocab_);
  ASSERT_EQ(run_all(*engine, {{prompt, greedy(2)}}).size(), 1u);  // the prompt is now cached
  RunRequest states{prompt, greedy(5)};
  states.params.temperature = 1;
  states.params.seed = 3;
  states.params.n = 2;
  states.return_hidden_states = true;
  RunRequest first_only = states;  // its prompt owner finishes before its sibling forks
  first_only.params.max_tokens = 1;
  const auto results = run_all(*engine, {states, {prompt, greedy(4)}, first_only});
  ASSERT_EQ(results[0].size(), 2u);
  EXPECT_NE(results[0][0].tokens, results[0][1].tokens);
  for (const auto* siblings : {&results[0], &results[2]})
    for (const SiblingResult& r : *siblings) {
      EXPECT_EQ(r.usage.cached_prompt_tokens, 0);  // no prefix reuse
      expect_hidden_states_of_direct_forward(tokens_read(prompt, r.tokens), r.hidden_states);
    }
  EXPECT_TRUE(results[1][0].hidden_states.empty());
  EXPECT_GT(results[1][0].usage.cached_prompt_tokens, 0);
  engine->flush_prefix_cache();
  expect_pools_full(*engine);
}

// hidden_states_start: the cached prefix before it is reused; the states from it on equal a
// direct forward's. With max_tokens 0 and the last prompt position (an embedding) one row comes
// back.
TEST_F(EngineTest, HiddenStatesFromAStartReuseTheCachedPrefixBeforeIt) {
  auto engine = make(small_options(64));
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = tokens_of(40, 16, vocab_);
  ASSERT_EQ(run_all(*engine, {{prompt, greedy(2)}}).size(), 1u);  // the prompt is now cached
  for (int64_t max_tokens : {3, 0}) {
    const int64_t start = max_tokens ? 35 : 39;
    Collector states;
    GenerateRequest g;
    g.prompt = prompt;
    g.sampling = greedy(max_tokens);
    g.return_hidden_states = true;
    g.hidden_states_start = start;
    g.sink = states.sink();
    ASSERT_TRUE(engine->submit(std::move(g)).ok());
    engine->wait_idle();
    const SiblingResult r = states.results().at(0);
    EXPECT_EQ(r.usage.cached_prompt_tokens, 32);  // whole 16-token blocks up to the start
    EXPECT_EQ(r.tokens.size(), static_cast<size_t>(max_tokens));
    expect_hidden_states_of_direct_forward(tokens_read(prompt, r.tokens), r.hidden_states, start);
  }
  engine->flush_prefix_cache();
  expect_pools_full(*engine);
}

// routed_experts_start: what an earlier turn already has may come from the prefix cache; the
// positions reported from the start on equal a direct forward's.
TEST_F(EngineTest, RoutedExpertsFromAStartReuseTheCachedPrefixBeforeIt) {
  auto engine = make(small_options(64));
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = tokens_of(40, 6, vocab_);
  ASSERT_EQ(run_all(*engine, {{prompt, greedy(2)}}).size(), 1u);  // the prompt is now cached
  Collector routed;
  GenerateRequest g;
  g.prompt = prompt;
  g.sampling = greedy(3);
  g.return_routed_experts = true;
  g.routed_experts_start = 35;
  g.sink = routed.sink();
  ASSERT_TRUE(engine->submit(std::move(g)).ok());
  engine->wait_idle();
  const SiblingResult r = routed.results().at(0);
  EXPECT_EQ(r.usage.cached_prompt_tokens, 32);  // whole 16-token blocks up to position 35
  expect_routing_of_direct_forward(tokens_read(prompt, r.tokens), r.routed_experts, 35);
  engine->flush_prefix_cache();
  expect_pools_full(*engine);
}

// stop_sibling (what the server's stop strings call): the sibling finishes kStop before the next
// step with the routing of every token it read, its siblings run on to max_tokens, the pools come
// back, and stopping a finished request is ignored.
TEST_F(EngineTest, AStoppedSiblingFinishesAtOnceWithItsRouting) {
  auto engine = make(small_options(64));
  ASSERT_NE(engine, nullptr);
  Collector collected;
  GenerateRequest g;
  g.prompt = tokens_of(20, 9, vocab_);
  g.sampling = greedy(30);
  g.sampling.n = 3;
  g.return_routed_experts = true;
  Engine* e = engine.get();
  bool stopped = false;  // engine thread only
  g.sink = [e, &stopped, inner = collected.sink()](TokenEvent&& ev) {
    if (ev.sibling == 1 && !ev.finish && !ev.tokens.empty() && !stopped) {
      stopped = true;
      e->stop_sibling(ev.request, 1);
    }
    inner(std::move(ev));
  };
  auto id = engine->submit(std::move(g));
  ASSERT_TRUE(id.ok()) << id.error().message;
  engine->wait_idle();
  const std::vector<SiblingResult> r = collected.results();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].finish, FinishReason::kStop);
  ASSERT_EQ(r[1].tokens.size(), 1u);  // stopped after its first token, before another step
  expect_routing_of_direct_forward(tokens_read(tokens_of(20, 9, vocab_), r[1].tokens),
                                   r[1].routed_experts, 0);
  for (int s : {0, 2}) {
    EXPECT_EQ(r[s].finish, FinishReason::kLength) << s;
    EXPECT_EQ(r[s].tokens.size(), 30u) << s;
  }
  engine->stop_sibling(*id, 0);  // finished: ignored
  engine->stop_sibling(RequestId(12345), 0);
  engine->flush_prefix_cache();
  expect_pools_full(*engine);
}

// Stopping the prompt owner (sibling 0) before its first token: the siblings that were to fork
// from it run from the prompt themselves, with the tokens they get when nothing is stopped; the
// request finishes (before, they waited for a fork that never came and the request never ended).
TEST_F(EngineTest, StoppingThePromptOwnerBeforeItsFirstTokenLetsItsSiblingsRun) {
  auto engine = make(small_options(64));
  ASSERT_NE(engine, nullptr);
  GenerateRequest g;
  g.prompt = tokens_of(40, 21, vocab_);
  g.sampling = greedy(8);
  g.sampling.n = 3;
  g.sampling.temperature = 0.8f;
  g.sampling.seed = 5;
  Collector plain;
  GenerateRequest unstopped = g;
  unstopped.sink = plain.sink();
  ASSERT_TRUE(engine->submit(std::move(unstopped)).ok());
  engine->wait_idle();
  engine->flush_prefix_cache();
  ASSERT_TRUE(engine->pause(PauseMode::kKeep, false).ok());  // the stop lands before any step
  Collector stopped;
  g.sink = stopped.sink();
  auto id = engine->submit(std::move(g));
  ASSERT_TRUE(id.ok());
  engine->stop_sibling(*id, 0);
  ASSERT_TRUE(engine->resume().ok());
  engine->wait_idle();
  const std::vector<SiblingResult> want = plain.results(), got = stopped.results();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].finish, FinishReason::kStop);
  EXPECT_TRUE(got[0].tokens.empty());
  for (int k : {1, 2}) {
    EXPECT_EQ(got[k].finish, FinishReason::kLength) << k;
    EXPECT_EQ(got[k].tokens, want[k].tokens) << k;
  }
  expect_pools_full(*engine);
}

// The engine forgets a request's sequences once it finished (they held its tokens, sampling
// state, routing and hidden-state records: a server leaked them request after request).
TEST_F(EngineTest, FinishedRequestsLeaveNoSequenceRecords) {
  auto engine = make(small_options(64));
  ASSERT_NE(engine, nullptr);
  std::vector<RunRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    RunRequest r{tokens_of(10 + 3 * i, 300 + i, vocab_), greedy(5)};
    r.params.n = 1 + i % 3;
    r.return_routed_experts = i % 2 == 0;
    reqs.push_back(r);
  }
  (void)run_all(*engine, reqs);
  Collector cancelled;
  auto id = engine->submit(generate_request(RunRequest{tokens_of(30, 7, vocab_), greedy(500)},
                                            cancelled.sink()));
  ASSERT_TRUE(id.ok());
  wait_for_output(cancelled);
  engine->cancel(*id);
  engine->wait_idle();
  engine->flush_prefix_cache();  // a loop turn: the cancelled request's records go too
  engine->flush_prefix_cache();
  EXPECT_EQ(engine->stats().sequence_records, 0);
}

// tiny-beam at 16-token blocks: a sliding block is 64 KiB (4 layers), a full one 32 KiB, and 256
// running sequences hold 3 sliding blocks each (768); a step of T tokens adds T / 16 more.
TEST_F(EngineTest, DefaultStepBudgetHalvesToFitAnExplicitKvBudget) {
  auto g = kv_geometry_from_config(weights_->config, 16);
  ASSERT_TRUE(g.ok()) << g.error().message;
  const int64_t mib = int64_t{1} << 20;
  EXPECT_EQ(fit_step_tokens_to_kv_budget(8192, *g, 1024 * mib, 256), 8192);
  EXPECT_EQ(fit_step_tokens_to_kv_budget(8192, *g, 72 * mib, 256), 4096);  // 1,024 blocks, 64 MiB
  EXPECT_EQ(fit_step_tokens_to_kv_budget(8192, *g, 64 * mib, 256),
            2048);  // 4096 leaves no full block
  EXPECT_EQ(fit_step_tokens_to_kv_budget(8192, *g, 64 * mib, 64), 8192);
  // Never below the CPU's default: a budget too small for it keeps 2048 for the plan to refuse.
  EXPECT_EQ(fit_step_tokens_to_kv_budget(8192, *g, 40 * mib, 256), 2048);
  EXPECT_EQ(fit_step_tokens_to_kv_budget(2048, *g, 40 * mib, 256), 2048);
  KvPoolSplit split;
  split.max_running_seqs = 256;
  split.max_step_tokens = 2048;
  EXPECT_FALSE(plan_kv_pools(*g, 40 * mib, split).ok());
}

TEST_F(EngineTest, StepBudgetDefaultsForTheDeviceAndIsChecked) {
  EngineOptions o = small_options();
  o.max_tokens_per_step.reset();
  auto unset = make(o);
  ASSERT_NE(unset, nullptr);
  EXPECT_EQ(unset->max_tokens_per_step(), 2048);
  auto given = make(small_options(7));
  ASSERT_NE(given, nullptr);
  EXPECT_EQ(given->max_tokens_per_step(), 7);
  for (auto [step, running] : {std::pair<int64_t, int64_t>{0, 32}, {-5, 32}, {64, 0}}) {
    EngineOptions bad = small_options(step);
    bad.max_running = running;
    auto e = Engine::create(weights_, bad);
    ASSERT_FALSE(e.ok()) << step << " " << running;
    EXPECT_NE(e.error().message.find("max_tokens_per_step and max_running must be >= 1"),
              std::string::npos)
        << e.error().message;
  }
}

}  // namespace
}  // namespace beam::testing
