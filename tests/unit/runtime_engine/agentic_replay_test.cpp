// The multi-turn agentic replay (runtime/bench) on models/tiny-beam: ≥ 90% of turn-2+ prompt
// tokens hit the prefix cache when the pools are large; with the full pool sized for half of the
// sessions the hit rate degrades gradually (stays well above zero) and no request fails.
#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "runtime/bench/offline_bench.h"
#include "runtime/kv_cache/kv_geometry.h"

namespace beam::testing {
namespace {

WorkloadOptions agentic() {
  WorkloadOptions w;
  w.workload = Workload::kAgentic;
  w.conversations = 4;
  w.turns = 6;
  w.first_prompt_len = 1024;
  w.turn_append_len = 100;
  w.output_len = 16;
  return w;
}

EngineOptions options() {
  EngineOptions o;
  o.block_size_tokens = 16;
  o.max_tokens_per_step = 512;
  o.max_running = 8;
  o.num_threads = 2;
  return o;
}

// A tiny-beam engine whose pools hold every session (nothing is evicted); null on failure.
std::unique_ptr<Engine> roomy_engine() {
  auto weights = engine_test_model("tiny-beam");
  if (weights == nullptr) return nullptr;
  EngineOptions o = options();
  o.kv_budget_bytes = 256 << 20;
  auto engine = Engine::create(weights, o);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  return engine.ok() ? std::move(*engine) : nullptr;
}

TEST(AgenticReplay, LargePoolsHitAtLeastNinetyPercentOnLaterTurns) {
  auto engine = roomy_engine();
  ASSERT_NE(engine, nullptr);
  BenchResult r = run_offline_bench(*engine, agentic());
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.requests, 4 * 6);
  EXPECT_GE(r.prefix_cache_hit_rate_later, 0.90);
  for (size_t t = 1; t < r.hit_rate_by_turn.size(); ++t)
    EXPECT_GE(r.hit_rate_by_turn[t], 0.85) << "turn " << t + 1;
  expect_pools_full(*engine);
}

// --one-off-per-turn: unrelated prompts beside every turn count in the totals (and hit
// nothing), not in the per-turn hit rates, which stay those of the sessions.
TEST(AgenticReplay, OneOffPromptsBesideEveryTurnCountInTheTotalsOnly) {
  auto engine = roomy_engine();
  ASSERT_NE(engine, nullptr);
  WorkloadOptions w = agentic();
  w.turns = 3;
  w.one_off_per_turn = 1;
  BenchResult r = run_offline_bench(*engine, w);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.requests, 2 * 4 * 3);
  EXPECT_EQ(r.prompt_tokens, 4 * 3 * 1024 + 4 * (1024 + (1024 + 116) + (1024 + 2 * 116)));
  for (size_t t = 1; t < r.hit_rate_by_turn.size(); ++t)
    EXPECT_GE(r.hit_rate_by_turn[t], 0.85) << "turn " << t + 1;
  EXPECT_LT(r.prefix_cache_hit_rate, r.prefix_cache_hit_rate_later);
  expect_pools_full(*engine);
}

// Four concurrent sessions, full pool for two: plain LRU evicts exactly the session that returns
// next and measured 0.05 on turns 2+. Eviction by expected return keeps a stable subset of
// sessions; the hit rate depends on how turns interleave with engine steps (client threads), and
// measured 0.16-0.74 over 8 runs on a loaded 2-core machine (2026-11-30). The bound is 2x LRU's.
TEST(AgenticReplay, HalfSizedPoolDegradesGraduallyWithoutFailures) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  EngineOptions o = options();
  KvGeometry g = *kv_geometry_from_config(weights->config, o.block_size_tokens);
  // Each session ends near 1024 + 5 * 116 = 1604 tokens (~101 blocks); hold half of 4 sessions.
  int64_t full_blocks = 2 * 101;
  int64_t sliding_blocks = o.max_running * 3 + *o.max_tokens_per_step / 16 + full_blocks / 10;
  o.kv_budget_bytes = full_blocks * g.bytes_per_block(AttentionKind::kFull) +
                      sliding_blocks * g.bytes_per_block(AttentionKind::kSliding);
  auto engine = Engine::create(weights, o);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  BenchResult r = run_offline_bench(**engine, agentic());
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.requests, 4 * 6);
  EXPECT_GE(r.prefix_cache_hit_rate_later, 0.10) << "hit rate collapsed under pool pressure";
  std::printf("half pool: hit rate turns 2+ = %.3f, preemptions = %lld\n", r.prefix_cache_hit_rate_later,
              static_cast<long long>(r.preemptions));
  expect_pools_full(**engine);
}

}  // namespace
}  // namespace beam::testing
