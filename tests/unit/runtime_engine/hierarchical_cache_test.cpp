// The hierarchical cache (EngineOptions::enable_hierarchical_cache, SGLang's HiCache) on the CPU:
// pools that hold about one prompt, so later prompts evict it; the host tier gives it back when it
// returns, with the tokens and logprobs of an engine that computes it from scratch, under each
// write policy; the host's counters, sizing and flush; settings it refuses.
#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "model/config.h"
#include "runtime/kv_cache/kv_geometry.h"

namespace beam::testing {
namespace {

class HierarchicalCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = engine_test_model("tiny-beam");
    ASSERT_NE(weights_, nullptr);
    vocab_ = weights_->config.vocab_size;
  }
  // 16-token blocks; device pools for ~12 full blocks (one 160-token prompt and a bit).
  EngineOptions options(bool hicache) const {
    EngineOptions o;
    o.num_threads = 2;
    o.block_size_tokens = 16;
    o.max_tokens_per_step = 64;
    o.max_running = 2;
    const KvGeometry g = *kv_geometry_from_config(weights_->config, o.block_size_tokens);
    o.kv_budget_bytes = 24 * g.bytes_per_block(AttentionKind::kFull) +
                        8 * g.bytes_per_block(AttentionKind::kSliding);
    o.enable_hierarchical_cache = hicache;
    o.hicache_ratio = 8;
    return o;
  }
  std::unique_ptr<Engine> make(const EngineOptions& o) const {
    auto e = Engine::create(weights_, o);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    return e.ok() ? std::move(*e) : nullptr;
  }
  RunRequest request(int64_t length, uint64_t seed) const {
    RunRequest r{tokens_of(length, seed, vocab_), greedy(6)};
    r.params.logprobs = true;
    r.params.top_logprobs = 3;
    return r;
  }

  static void expect_same(const SiblingResult& r, const SiblingResult& reference) {
    EXPECT_EQ(r.tokens, reference.tokens);
    ASSERT_EQ(r.logprobs.size(), reference.logprobs.size());
    for (size_t i = 0; i < r.logprobs.size(); ++i) {
      EXPECT_EQ(r.logprobs[i].chosen.logprob, reference.logprobs[i].chosen.logprob) << "token " << i;
      ASSERT_EQ(r.logprobs[i].top.size(), reference.logprobs[i].top.size());
      for (size_t k = 0; k < r.logprobs[i].top.size(); ++k) {
        EXPECT_EQ(r.logprobs[i].top[k].token, reference.logprobs[i].top[k].token);
        EXPECT_EQ(r.logprobs[i].top[k].logprob, reference.logprobs[i].top[k].logprob);
      }
    }
  }
  SiblingResult reference(const RunRequest& r) const {
    EngineOptions plain = options(false);
    plain.enable_prefix_cache = false;
    return run_all(*make(plain), {r})[0][0];
  }

  std::shared_ptr<const BeamWeights> weights_;
  int64_t vocab_ = 0;
};

TEST_F(HierarchicalCacheTest, AnEvictedPromptComesBackFromTheHostExactly) {
  const RunRequest a = request(160, 11);
  std::vector<RunRequest> others;
  for (uint64_t s = 0; s < 3; ++s) others.push_back(request(150, 20 + s));

  const SiblingResult expected = reference(a);

  auto device_only = make(options(false));
  run_all(*device_only, {a});
  for (const RunRequest& r : others) run_all(*device_only, {r});
  const SiblingResult without = run_all(*device_only, {a})[0][0];
  EXPECT_LT(without.usage.cached_prompt_tokens, 144) << "the other prompts should evict it";

  auto hicache = make(options(true));
  const SiblingResult first = run_all(*hicache, {a})[0][0];
  for (const RunRequest& r : others) run_all(*hicache, {r});
  const EngineStats before = hicache->stats();
  EXPECT_GT(before.host_cache.tier.saved.full, 0);
  const SiblingResult again = run_all(*hicache, {a})[0][0];
  EXPECT_EQ(again.usage.cached_prompt_tokens, 144);  // whole blocks, the last token recomputed
  const EngineStats after = hicache->stats();
  const int64_t loaded_full = after.host_cache.tier.loaded.full - before.host_cache.tier.loaded.full;
  EXPECT_GT(loaded_full, 0);
  EXPECT_EQ(after.host_cache.restored_tokens - before.host_cache.restored_tokens, loaded_full * 16);
  EXPECT_GT(after.host_cache.tier.loaded.sliding, before.host_cache.tier.loaded.sliding);

  expect_same(first, expected);
  expect_same(again, expected);
  hicache->flush_prefix_cache();  // also forgets the host tier
  expect_pools_full(*hicache);
  EXPECT_EQ(hicache->stats().host_cache.tier.used, BlockCounts{});
}

// Write-through copies the prompt as it is cached (before anything is evicted); write-through-
// selective copies it only once a second request used it, and drops a single-use prompt. Either
// way what comes back is exact.
TEST_F(HierarchicalCacheTest, WriteThroughPoliciesCopyAsTheyCacheAndGiveItBackExactly) {
  const RunRequest a = request(160, 11);
  const SiblingResult expected = reference(a);
  std::vector<RunRequest> others;
  for (uint64_t s = 0; s < 3; ++s) others.push_back(request(150, 20 + s));

  EngineOptions through = options(true);
  through.hicache_write_policy = HostWritePolicy::kWriteThrough;
  auto wt = make(through);
  run_all(*wt, {a});
  EXPECT_GE(wt->stats().host_cache.tier.saved.full, 9);  // its whole blocks, nothing evicted yet
  for (const RunRequest& r : others) run_all(*wt, {r});
  const SiblingResult back = run_all(*wt, {a})[0][0];
  EXPECT_EQ(back.usage.cached_prompt_tokens, 144);
  expect_same(back, expected);

  EngineOptions selective = options(true);
  selective.hicache_write_policy = HostWritePolicy::kWriteThroughSelective;
  auto ws = make(selective);
  run_all(*ws, {a});
  EXPECT_EQ(ws->stats().host_cache.tier.saved.full, 0);  // one use
  for (const RunRequest& r : others) run_all(*ws, {r});   // evicted: single-use, not saved
  EXPECT_EQ(ws->stats().host_cache.tier.saved.full, 0);
  const SiblingResult cold = run_all(*ws, {a})[0][0];
  EXPECT_LT(cold.usage.cached_prompt_tokens, 144);
  const SiblingResult warm = run_all(*ws, {a})[0][0];  // its second use: now on the host
  EXPECT_EQ(warm.usage.cached_prompt_tokens, 144);
  EXPECT_GT(ws->stats().host_cache.tier.saved.full, 0);
  for (const RunRequest& r : others) run_all(*ws, {r});
  const SiblingResult hot = run_all(*ws, {a})[0][0];
  EXPECT_EQ(hot.usage.cached_prompt_tokens, 144);
  for (const SiblingResult* r : {&cold, &warm, &hot}) expect_same(*r, expected);
  expect_pools_full(*ws);
}

// Two tensor-parallel ranks (CPU threads): each holds its KV heads of every host block, and the
// evicted prompt comes back with what a two-rank engine computing it from scratch gives (the
// workers make rank 0's host copies in the same order, before their next step).
TEST_F(HierarchicalCacheTest, TwoRanksGetAnEvictedPromptBackExactly) {
  const RunRequest a = request(160, 11);
  std::vector<RunRequest> others;
  for (uint64_t s = 0; s < 3; ++s) others.push_back(request(150, 20 + s));
  EngineOptions plain = options(false);
  plain.enable_prefix_cache = false;
  plain.tensor_parallel_size = 2;
  const SiblingResult expected = run_all(*make(plain), {a})[0][0];

  for (HostWritePolicy policy : {HostWritePolicy::kWriteBack, HostWritePolicy::kWriteThrough}) {
    SCOPED_TRACE(host_write_policy_name(policy));
    EngineOptions o = options(true);
    o.tensor_parallel_size = 2;
    o.kv_budget_bytes = *o.kv_budget_bytes / 2;  // a rank's budget: the same blocks of half the heads
    o.hicache_write_policy = policy;
    auto e = make(o);
    ASSERT_NE(e, nullptr);
    const EngineStats s = e->stats();
    KvGeometry g = *kv_geometry_from_config(weights_->config, 16);
    g.num_kv_heads /= 2;  // a rank's heads
    EXPECT_EQ(s.host_cache.bytes, 2 * (s.host_cache.tier.capacity.full * g.bytes_per_block(AttentionKind::kFull) +
                                       s.host_cache.tier.capacity.sliding *
                                           g.bytes_per_block(AttentionKind::kSliding)));
    expect_same(run_all(*e, {a})[0][0], expected);
    for (const RunRequest& r : others) run_all(*e, {r});
    const SiblingResult again = run_all(*e, {a})[0][0];
    EXPECT_EQ(again.usage.cached_prompt_tokens, 144);
    EXPECT_GT(e->stats().host_cache.tier.loaded.full, 0);
    expect_same(again, expected);
    expect_pools_full(*e);
  }
}

TEST_F(HierarchicalCacheTest, StatsDescribeTheHostTier) {
  auto e = make(options(true));
  const EngineStats s = e->stats();
  EXPECT_TRUE(s.host_cache.enabled);
  EXPECT_EQ(s.host_cache.tier.capacity.full, 8 * s.full_pool.total_blocks);
  EXPECT_EQ(s.host_cache.tier.capacity.sliding, 8 * s.sliding_pool.total_blocks);
  const KvGeometry g = *kv_geometry_from_config(weights_->config, 16);
  EXPECT_EQ(s.host_cache.bytes, s.host_cache.tier.capacity.full * g.bytes_per_block(AttentionKind::kFull) +
                                    s.host_cache.tier.capacity.sliding *
                                        g.bytes_per_block(AttentionKind::kSliding));
  EXPECT_FALSE(make(options(false))->stats().host_cache.enabled);

  EngineOptions sized = options(true);
  sized.hicache_bytes = 40 * g.bytes_per_block(AttentionKind::kFull) + 40 * g.bytes_per_block(AttentionKind::kSliding);
  const EngineStats t = make(sized)->stats();
  EXPECT_LE(t.host_cache.bytes, *sized.hicache_bytes);
  EXPECT_GT(t.host_cache.tier.capacity.full, 0);
  EXPECT_GT(t.host_cache.tier.capacity.sliding, 0);
}

TEST_F(HierarchicalCacheTest, SettingsItCannotServeAreErrors) {
  auto error_of = [&](const EngineOptions& o) {
    auto e = Engine::create(weights_, o);
    return e.ok() ? std::string() : e.error().message;
  };
  EngineOptions no_prefix = options(true);
  no_prefix.enable_prefix_cache = false;
  EXPECT_NE(error_of(no_prefix).find("needs the prefix cache"), std::string::npos) << error_of(no_prefix);
  EngineOptions ratio = options(true);
  ratio.hicache_ratio = 0;
  EXPECT_NE(error_of(ratio).find("hicache_ratio"), std::string::npos) << error_of(ratio);
  EngineOptions size = options(true);
  size.hicache_bytes = -1;
  EXPECT_NE(error_of(size).find("hicache size"), std::string::npos) << error_of(size);
  EngineOptions tiny = options(true);
  tiny.hicache_bytes = 1;
  EXPECT_NE(error_of(tiny).find("holds no block"), std::string::npos) << error_of(tiny);
  EngineOptions huge = options(true);
  huge.hicache_bytes = int64_t{1} << 52;  // 4 PiB: more than any host has
  EXPECT_NE(error_of(huge).find("available: lower --hicache-ratio or give --hicache-size"),
            std::string::npos)
      << error_of(huge);
}

}  // namespace
}  // namespace beam::testing
