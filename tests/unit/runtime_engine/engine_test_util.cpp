// Engine test helpers (see engine_test_util.h).
#include "engine_test_util.h"

#include <gtest/gtest.h>

#include <random>

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
    r.usage = ev.usage;
    if (!ev.prompt_logprobs.empty()) {
      EXPECT_EQ(r.num_events, 0) << "prompt logprobs after the first event";
      r.prompt_logprobs = std::move(ev.prompt_logprobs);
      r.events_with_prompt_logprobs++;
    }
    r.num_events++;
    if (ev.finish) r.finish = ev.finish;
    if (ev.finish) r.routed_experts = std::move(ev.routed_experts);
  };
}

std::vector<SiblingResult> Collector::results() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SiblingResult> out;
  for (const auto& [k, v] : by_sibling_) out.push_back(v);
  return out;
}

std::vector<std::vector<SiblingResult>> run_all(Engine& engine, const std::vector<RunRequest>& reqs) {
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const auto& r : reqs) {
    collectors.push_back(std::make_unique<Collector>());
    GenerateRequest g;
    g.prompt = r.prompt;
    g.sampling = r.params;
    g.sink = collectors.back()->sink();
    auto id = engine.submit(std::move(g));
    EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().message);
  }
  engine.wait_idle();
  std::vector<std::vector<SiblingResult>> out;
  for (const auto& c : collectors) out.push_back(c->results());
  return out;
}

void expect_pools_full(Engine& engine) {
  engine.flush_prefix_cache();
  EngineStats s = engine.stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.full_pool.free_blocks, s.full_pool.total_blocks);
  EXPECT_EQ(s.sliding_pool.free_blocks, s.sliding_pool.total_blocks);
}

}  // namespace beam::testing
