// Engine test helpers (see engine_test_util.h).
#include "engine_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "core/thread_pool.h"
#include "model/synthetic_weights.h"

namespace beam::testing {

std::shared_ptr<const BeamWeights> engine_test_model(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const BeamWeights>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  auto w = load_beam_weights(std::string(BEAMSERVE_SOURCE_DIR) + "/models/" + name);
  if (!w.ok()) {
    ADD_FAILURE() << w.error().message;
    return nullptr;
  }
  return cache[name] = *w;
}

std::shared_ptr<const BeamWeights> other_synthetic_weights(const BeamConfig& config) {
  ThreadPool pool(2);
  KernelContext ctx;
  ctx.pool = &pool;
  auto w = make_synthetic_weights(ctx, config, SyntheticWeightOptions{.seed = 7});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  return w.ok() ? *w : nullptr;
}

std::unique_ptr<Engine> control_test_engine(std::shared_ptr<const BeamWeights> weights,
                                            bool sleep_mode) {
  EngineOptions o;
  o.num_threads = 2;
  o.block_size_tokens = 16;
  o.max_tokens_per_step = 64;
  o.kv_budget_bytes = 64 << 20;
  o.enable_sleep_mode = sleep_mode;
  auto e = Engine::create(std::move(weights), o);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::move(*e) : nullptr;
}

std::vector<int32_t> tokens_of(int64_t n, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return t;
}

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

EventSink Collector::sink() {
  return [this](TokenEvent&& ev) {
    std::lock_guard<std::mutex> lock(mu_);
    SiblingResult& r = by_sibling_[ev.sibling];
    EXPECT_FALSE(r.finish.has_value()) << "event after the final one";
    r.tokens.insert(r.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    for (auto& lp : ev.logprobs) r.logprobs.push_back(std::move(lp));
    EXPECT_TRUE(ev.entropies.empty() || ev.entropies.size() == ev.tokens.size())
        << "entropies not parallel to the event's tokens";
    r.entropies.insert(r.entropies.end(), ev.entropies.begin(), ev.entropies.end());
    EXPECT_TRUE(ev.token_ids_logprobs.empty() || ev.token_ids_logprobs.size() == ev.tokens.size());
    for (auto& ids : ev.token_ids_logprobs) r.token_ids_logprobs.push_back(std::move(ids));
    r.usage = ev.usage;
    if (!ev.prompt_logprobs.empty()) {
      EXPECT_EQ(r.num_events, 0) << "prompt logprobs after the first event";
      r.prompt_logprobs = std::move(ev.prompt_logprobs);
      r.events_with_prompt_logprobs++;
    }
    r.num_events++;
    if (ev.finish) r.finish = ev.finish;
    if (ev.finish) r.routed_experts = std::move(ev.routed_experts);
    if (ev.finish) r.hidden_states = std::move(ev.hidden_states);
  };
}

std::vector<SiblingResult> Collector::results() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SiblingResult> out;
  for (const auto& [k, v] : by_sibling_) out.push_back(v);
  return out;
}

GenerateRequest generate_request(const RunRequest& r, EventSink sink) {
  GenerateRequest g;
  g.prompt = r.prompt;
  g.sampling = r.params;
  g.lora_name = r.lora_name;
  g.return_routed_experts = r.return_routed_experts;
  g.return_hidden_states = r.return_hidden_states;
  g.sink = std::move(sink);
  return g;
}

void submit(Engine& engine, const RunRequest& r, Collector* out) {
  ASSERT_TRUE(engine.submit(generate_request(r, out->sink())).ok());
}

void wait_for_output(const Collector& c) {
  for (int i = 0; i < 20000; ++i) {
    const auto r = c.results();
    if (!r.empty() && !r[0].tokens.empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FAIL() << "no output";
}

std::vector<std::vector<SiblingResult>> run_all(Engine& engine, const std::vector<RunRequest>& reqs) {
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const auto& r : reqs) {
    collectors.push_back(std::make_unique<Collector>());
    auto id = engine.submit(generate_request(r, collectors.back()->sink()));
    EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().message);
  }
  engine.wait_idle();
  std::vector<std::vector<SiblingResult>> out;
  for (const auto& c : collectors) out.push_back(c->results());
  return out;
}

ReasoningBudget test_reasoning_budget(int64_t max_tokens) {
  return ReasoningBudget{max_tokens, {140, 141}, std::nullopt};
}

std::vector<RunRequest> reasoning_budget_requests(const ReasoningBudget& budget, int64_t vocab) {
  std::vector<RunRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    RunRequest r;
    r.prompt = tokens_of(20 + i, 70 + static_cast<uint64_t>(i), vocab);
    r.params = greedy(3 * budget.max_tokens);
    if (i % 2) {
      r.params.temperature = 0.9;
      r.params.seed = 5;
      r.params.n = 3;
    }
    r.params.reasoning_budget = budget;
    reqs.push_back(r);
  }
  return reqs;
}

void expect_reasoning_budget_kept(const std::vector<int32_t>& tokens,
                                  const ReasoningBudget& budget) {
  const auto closed = std::find(tokens.begin(), tokens.end(), budget.end_tokens.back());
  ASSERT_NE(closed, tokens.end()) << "the reasoning was never closed";
  const int64_t at = closed - tokens.begin();
  const auto n_end = static_cast<int64_t>(budget.end_tokens.size());
  if (at < budget.max_tokens) return;  // the model closed it itself within the budget
  ASSERT_EQ(at, budget.max_tokens + n_end - 1) << "the close came late";
  for (int64_t i = 0; i < n_end; ++i)
    EXPECT_EQ(tokens[static_cast<size_t>(budget.max_tokens + i)],
              budget.end_tokens[static_cast<size_t>(i)]);
}

void expect_pools_full(Engine& engine) {
  engine.flush_prefix_cache();
  EngineStats s = engine.stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.full_pool.free_blocks, s.full_pool.total_blocks);
  EXPECT_EQ(s.sliding_pool.free_blocks, s.sliding_pool.total_blocks);
}

// Speculative decoding's promise: each request's sibling results as plain decoding's.
void expect_same_results(const std::vector<std::vector<SiblingResult>>& plain,
                         const std::vector<std::vector<SiblingResult>>& spec) {
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t r = 0; r < plain.size(); ++r) {
    ASSERT_EQ(plain[r].size(), spec[r].size());
    for (size_t k = 0; k < plain[r].size(); ++k) {
      const SiblingResult &a = plain[r][k], &b = spec[r][k];
      EXPECT_EQ(a.tokens, b.tokens) << "request " << r << " sibling " << k;
      EXPECT_EQ(a.finish, b.finish) << "request " << r << " sibling " << k;
      EXPECT_EQ(a.usage.completion_tokens, b.usage.completion_tokens);
      EXPECT_EQ(a.routed_experts, b.routed_experts) << "request " << r << " sibling " << k;
      EXPECT_EQ(a.hidden_states, b.hidden_states) << "request " << r << " sibling " << k;
      ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
      for (size_t t = 0; t < a.logprobs.size(); ++t) {
        EXPECT_EQ(a.logprobs[t].chosen.token, b.logprobs[t].chosen.token);
        EXPECT_NEAR(a.logprobs[t].chosen.logprob, b.logprobs[t].chosen.logprob, 1e-4)
            << "request " << r << " sibling " << k << " token " << t;
        ASSERT_EQ(a.logprobs[t].top.size(), b.logprobs[t].top.size());
        for (size_t i = 0; i < a.logprobs[t].top.size(); ++i)
          EXPECT_EQ(a.logprobs[t].top[i].token, b.logprobs[t].top[i].token);
      }
      ASSERT_EQ(a.token_ids_logprobs.size(), b.token_ids_logprobs.size());
      for (size_t t = 0; t < a.token_ids_logprobs.size(); ++t) {
        ASSERT_EQ(a.token_ids_logprobs[t].size(), b.token_ids_logprobs[t].size());
        for (size_t i = 0; i < a.token_ids_logprobs[t].size(); ++i) {
          EXPECT_EQ(a.token_ids_logprobs[t][i].token, b.token_ids_logprobs[t][i].token);
          EXPECT_NEAR(a.token_ids_logprobs[t][i].logprob, b.token_ids_logprobs[t][i].logprob, 1e-4);
        }
      }
      ASSERT_EQ(a.entropies.size(), b.entropies.size());
      for (size_t t = 0; t < a.entropies.size(); ++t)
        EXPECT_NEAR(a.entropies[t], b.entropies[t], 1e-4)
            << "request " << r << " sibling " << k << " token " << t;
    }
  }
}

}  // namespace beam::testing
