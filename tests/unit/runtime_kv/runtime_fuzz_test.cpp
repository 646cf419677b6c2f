// RuntimeFuzzTest: randomized workloads over the scheduler, KV cache and prefix cache (submits
// with shared prefixes, forks, priorities, cancels, flushes, speculative decodes, tiny pools that
// force preemption, a hierarchical cache's host tier) with every invariant checked after each
// operation and every key a forward reads checked against the tokens it must come from; when
// everything is done and the cache flushed, both pools are full again.
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <random>
#include <tuple>
#include <vector>

#include "sim_engine.h"

namespace beam {
namespace {

using testing::SimEngine;

struct FuzzCase {
  int64_t block_size;
  int64_t window;
  int32_t full_blocks;
  int32_t sliding_blocks;
  int64_t checkpoint_blocks;  // checkpoint interval in blocks, 0 = none
  int64_t speculative;
  bool prefix_cache;
  BlockCounts host_slots = {};  // the hierarchical cache's host tier (zero: none)
  HostWritePolicy write_policy = HostWritePolicy::kWriteBack;
};

// The case in ctest's test names (without it, gtest prints the struct's bytes, padding included).
void PrintTo(const FuzzCase& c, std::ostream* os) {
  *os << "block" << c.block_size << "_window" << c.window << "_full" << c.full_blocks << "_sliding"
      << c.sliding_blocks << "_checkpoint" << c.checkpoint_blocks << "_spec" << c.speculative
      << (c.prefix_cache ? "_prefix" : "_noprefix");
  if (c.host_slots.full > 0)
    *os << "_host" << c.host_slots.full << "x" << c.host_slots.sliding << "_"
        << host_write_policy_name(c.write_policy);
}

class RuntimeFuzzTest : public ::testing::TestWithParam<std::tuple<FuzzCase, uint32_t>> {};

TEST_P(RuntimeFuzzTest, InvariantsHoldAndPoolsRefill) {
  const auto [fc, seed] = GetParam();
  SchedulerConfig sc;
  sc.max_step_tokens = 48;
  sc.max_prefill_chunk_tokens = 24;
  sc.max_running_seqs = 6;
  SimEngine e(KvCacheConfig{fc.block_size, fc.window, fc.full_blocks, fc.sliding_blocks}, sc,
              fc.prefix_cache, fc.checkpoint_blocks * fc.block_size, fc.host_slots, fc.write_policy);
  e.set_draft_tokens(fc.speculative);
  std::mt19937 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  // A few shared prefixes so that matches, heals and branch points happen.
  std::vector<std::vector<int32_t>> prefixes;
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> t(static_cast<size_t>(uniform(1, 60)));
    for (int32_t& x : t) x = static_cast<int32_t>(uniform(1, 5));
    prefixes.push_back(t);
  }
  std::vector<SeqId> submitted;
  for (int op = 0; op < 400; ++op) {
    const int64_t kind = uniform(0, 9);
    if (kind <= 2) {
      std::vector<int32_t> prompt = prefixes[uniform(0, 3)];
      prompt.resize(static_cast<size_t>(uniform(1, static_cast<int64_t>(prompt.size()))));
      for (int64_t i = uniform(0, 40); i > 0; --i) prompt.push_back(static_cast<int32_t>(uniform(1, 5)));
      submitted.push_back(e.submit(prompt, uniform(1, 30), static_cast<int32_t>(uniform(0, 2)),
                                   static_cast<int32_t>(uniform(0, 5) == 0 ? uniform(1, 2) : 0)));
      // A third cache their prompt only (deterministic GPU inference's token limit).
      if (uniform(0, 2) == 0)
        e.set_cache_limit(submitted.back(), static_cast<int64_t>(prompt.size()));
    } else if (kind == 3 && !submitted.empty()) {
      const SeqId victim = submitted[uniform(0, static_cast<int64_t>(submitted.size()) - 1)];
      if (!e.request(victim).done) e.cancel(victim);
    } else if (kind == 4 && e.prefix() != nullptr && uniform(0, 5) == 0) {
      e.prefix()->flush();
      e.check();
    } else {
      e.step();
    }
  }
  e.run_until_idle(20000);
  ASSERT_TRUE(e.idle());
  if (const HostKvTier* host = e.host_tier()) {  // the tight pools evict, and prompts come back
    const HostTierStats hs = host->stats();
    std::printf("host tier: saved %lld/%lld, loaded %lld/%lld blocks\n", static_cast<long long>(hs.saved.full),
                static_cast<long long>(hs.saved.sliding), static_cast<long long>(hs.loaded.full),
                static_cast<long long>(hs.loaded.sliding));
    EXPECT_GT(hs.saved.full, 0);
    EXPECT_GT(hs.loaded.full + hs.loaded.sliding, 0);
  }
  if (e.prefix()) e.prefix()->flush();
  e.check();
  EXPECT_EQ(e.kv().free_blocks(), e.kv().total_blocks());
  EXPECT_EQ(e.kv().num_sequences(), 0);
  for (SeqId id : submitted) {
    const auto& r = e.request(id);
    EXPECT_TRUE(r.done);
    EXPECT_LT(r.cached_tokens, std::max<int64_t>(r.prompt_len, 1));  // last prompt token computed
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RuntimeFuzzTest,
    ::testing::Combine(
        ::testing::Values(FuzzCase{4, 8, 64, 24, 0, 0, true},     // roomy-ish
                          FuzzCase{4, 8, 24, 12, 2, 0, true},     // tight: preemption, checkpoints
                          FuzzCase{1, 3, 48, 12, 4, 0, true},     // one-token blocks
                          FuzzCase{4, 10, 40, 16, 3, 2, true},    // window not a block multiple, spec
                          FuzzCase{16, 16, 12, 6, 1, 0, true},    // big blocks, window of one block
                          FuzzCase{4, 8, 24, 12, 0, 1, false},    // no prefix cache
                          // hierarchical cache: a host tier larger / smaller than the pools
                          FuzzCase{4, 8, 24, 12, 2, 0, true, {64, 40}},
                          FuzzCase{4, 10, 40, 16, 3, 2, true, {20, 6}},
                          FuzzCase{1, 3, 48, 12, 4, 0, true, {96, 24}},
                          FuzzCase{16, 16, 12, 6, 1, 0, true, {30, 12}},
                          // write-through (copies as blocks are cached), selective (reused only)
                          FuzzCase{4, 8, 24, 12, 2, 0, true, {64, 40}, HostWritePolicy::kWriteThrough},
                          FuzzCase{4, 10, 40, 16, 3, 2, true, {20, 6}, HostWritePolicy::kWriteThrough},
                          FuzzCase{4, 8, 24, 12, 2, 0, true, {64, 40},
                                   HostWritePolicy::kWriteThroughSelective},
                          FuzzCase{1, 3, 48, 12, 4, 0, true, {96, 24},
                                   HostWritePolicy::kWriteThroughSelective}),
        ::testing::Values(1u, 2u, 3u, 4u, 5u)));

}  // namespace
}  // namespace beam
