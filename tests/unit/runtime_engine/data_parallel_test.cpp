// ReplicaBalancer (which data-parallel replica takes a request), PromptBlockIndex (the prompt blocks
// a replica was sent) and add_replica_stats (one EngineStats over the replicas): the policies'
// picks, ties in turn, pinned requests, releases, the cache-aware policy following prefixes until
// the loads are imbalanced, the policies' names.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/data_parallel.h"

namespace beam {
namespace {

std::vector<int> picks(ReplicaBalancer& b, int count, int64_t tokens = 10) {
  std::vector<int> out;
  for (int i = 0; i < count; ++i) out.push_back(b.take({.tokens = tokens}));
  return out;
}

TEST(ReplicaBalancer, RoundRobinTakesTheReplicasInTurn) {
  ReplicaBalancer b(3, BalancerOptions{.policy = LoadBalance::kRoundRobin});
  EXPECT_EQ(picks(b, 7), (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
  b.release(1, 10);  // load does not matter to it
  EXPECT_EQ(b.take({.tokens = 10}), 1);
}

TEST(ReplicaBalancer, ShortestQueueTakesTheFewestRequestsTiesInTurn) {
  ReplicaBalancer b(3, BalancerOptions{.policy = LoadBalance::kShortestQueue});
  EXPECT_EQ(picks(b, 3), (std::vector<int>{0, 1, 2}));  // all tied: in turn
  b.release(1, 10);
  b.release(0, 10);
  // Replicas 0 and 1 hold none, 2 holds one: the tie between 0 and 1 starts after the last taken.
  EXPECT_EQ(b.take({.tokens = 10}), 0);
  EXPECT_EQ(b.take({.tokens = 10}), 1);
  EXPECT_EQ(b.take({.tokens = 10}), 2);
  std::vector<ReplicaBalancer::Load> loads = b.loads();
  ASSERT_EQ(loads.size(), 3u);
  EXPECT_EQ(loads[0].requests, 1);
  EXPECT_EQ(loads[1].requests, 1);
  EXPECT_EQ(loads[2].requests, 2);
  // Requests count, not their tokens: a long one on replica 0 leaves it as loaded as replica 1.
  b.release(0, 10);
  EXPECT_EQ(b.take({.tokens = 1000}), 0);  // 1, 1, 2
  EXPECT_EQ(b.take({.tokens = 1}), 1);     // tied with 0: after the last taken
  EXPECT_EQ(b.take({.tokens = 1}), 0);     // 1 against 2 and 2
  loads = b.loads();
  EXPECT_EQ(loads[0].tokens, 1001);
  EXPECT_EQ(loads[0].requests, 2);
}

TEST(ReplicaBalancer, MinimumTokensTakesTheFewestTokens) {
  ReplicaBalancer b(2, BalancerOptions{.policy = LoadBalance::kMinimumTokens});
  EXPECT_EQ(b.take({.tokens = 1000}), 0);
  EXPECT_EQ(b.take({.tokens = 10}), 1);
  EXPECT_EQ(b.take({.tokens = 10}), 1);  // 20 tokens against 1,000
  EXPECT_EQ(b.take({.tokens = 980}), 1);  // 20 against 1,000
  EXPECT_EQ(b.take({.tokens = 5}), 0);    // 1,000 against 1,000: a tie, after the last taken
  b.release(0, 1000);
  b.release(0, 5);
  EXPECT_EQ(b.take({.tokens = 5}), 0);
  EXPECT_EQ(b.loads()[1].tokens, 1000);
  EXPECT_EQ(b.loads()[1].requests, 3);
}

TEST(ReplicaBalancer, PinnedRequestsCountButDoNotMoveTheTurn) {
  ReplicaBalancer b(2, BalancerOptions{.policy = LoadBalance::kRoundRobin});
  EXPECT_EQ(b.take({.tokens = 10}, 1), 1);
  EXPECT_EQ(b.take({.tokens = 10}, 1), 1);
  EXPECT_EQ(b.take({.tokens = 10}), 0);
  EXPECT_EQ(b.take({.tokens = 10}), 1);
  EXPECT_EQ(b.loads()[1].requests, 3);
  ReplicaBalancer q(2, BalancerOptions{.policy = LoadBalance::kShortestQueue});
  EXPECT_EQ(q.take({.tokens = 10}, 0), 0);
  EXPECT_EQ(q.take({.tokens = 10}, 0), 0);
  EXPECT_EQ(q.take({.tokens = 10}), 1);  // the shorter queue
  EXPECT_EQ(q.take({.tokens = 10}), 1);
  EXPECT_EQ(q.take({.tokens = 10}), 0);  // tied at 2: after the last taken
}

// A prompt of `blocks` 4-token blocks: `shared` of them from seed 1, the rest from `seed`.
std::vector<int32_t> prompt_of(int blocks, int shared, int seed) {
  std::vector<int32_t> p;
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < 4; ++t) p.push_back((b < shared ? 1 : seed) * 1000 + b * 4 + t);
  return p;
}

BalancerOptions cache_aware(int64_t capacity = 1024) {
  return BalancerOptions{.policy = LoadBalance::kCacheAware, .block_tokens = 4,
                         .capacity_blocks = capacity, .balance_abs = 2, .balance_rel = 1.5};
}

TEST(ReplicaBalancer, CacheAwareFollowsThePrefixWhileTheLoadsAreBalanced) {
  ReplicaBalancer b(3, cache_aware());
  const std::vector<int32_t> first = prompt_of(10, 10, 1), second = prompt_of(10, 0, 2);
  // Nothing matches: the shortest queue (all tied: in turn).
  EXPECT_EQ(b.take({.tokens = 1, .prompt = first}), 0);
  EXPECT_EQ(b.take({.tokens = 1, .prompt = second}), 1);
  // A later turn of the first conversation (its prompt extended) goes where the first went; a
  // prompt sharing 2 of its 10 blocks with it (20% < 30%) goes to the shortest queue, one sharing
  // 4 (40%) where the first went.
  std::vector<int32_t> turn = first;
  for (int t = 0; t < 9; ++t) turn.push_back(7);
  EXPECT_EQ(b.take({.tokens = 1, .prompt = turn}), 0);
  EXPECT_EQ(b.take({.tokens = 1, .prompt = prompt_of(10, 2, 4)}), 2);
  EXPECT_EQ(b.take({.tokens = 1, .prompt = prompt_of(10, 4, 3)}), 0);
  // Another namespace (salt or adapter) matches nothing.
  EXPECT_EQ(b.take({.tokens = 1, .prompt = first, .prefix_namespace = 9}), 1);
  // Replica 0 now holds 3 requests, replica 1 two, replica 2 one: 3 - 1 = 2 is not past 2.
  EXPECT_EQ(b.take({.tokens = 1, .prompt = turn}), 0);
  // 4 against 1 is past both thresholds: the shortest queue, though replica 0 matches.
  EXPECT_EQ(b.take({.tokens = 1, .prompt = turn}), 2);
  EXPECT_EQ(b.loads()[0].requests, 4);
}

TEST(ReplicaBalancer, CacheAwarePinnedRequestsTeachTheirReplica) {
  ReplicaBalancer b(2, cache_aware());
  const std::vector<int32_t> p = prompt_of(6, 6, 1);
  EXPECT_EQ(b.take({.tokens = 1, .prompt = p}, 1), 1);
  EXPECT_EQ(b.take({.tokens = 1, .prompt = p}), 1);
  // A prompt shorter than a block has no chain: the shortest queue.
  EXPECT_EQ(b.take({.tokens = 1, .prompt = std::vector<int32_t>{1, 2}}), 0);
}

TEST(PromptBlockIndex, MatchesLeadingBlocksAndForgetsTailsFirst) {
  const std::vector<int32_t> p = prompt_of(5, 5, 1);
  const std::vector<uint64_t> chain = prompt_block_chain(p, 4, 0);
  ASSERT_EQ(chain.size(), 5u);
  EXPECT_EQ(prompt_block_chain(std::span(p).first(19), 4, 0).size(), 4u);  // full blocks only
  EXPECT_NE(prompt_block_chain(p, 4, 1), chain);  // another namespace
  EXPECT_NE(prompt_namespace("a", ""), prompt_namespace("", "a"));
  PromptBlockIndex index(6);
  EXPECT_EQ(index.matched(chain), 0);
  index.insert(chain);
  EXPECT_EQ(index.matched(chain), 5);
  std::vector<int32_t> other = p;
  other[9] = -1;  // block 2 differs: blocks 0 and 1 match
  EXPECT_EQ(index.matched(prompt_block_chain(other, 4, 0)), 2);
  // Two blocks of another prompt push out the least recent: the first prompt's last block.
  index.insert(prompt_block_chain(prompt_of(2, 0, 5), 4, 0));
  EXPECT_EQ(index.size(), 6);
  EXPECT_EQ(index.matched(chain), 4);
}

TEST(LoadBalance, NamesRoundTrip) {
  for (LoadBalance b : {LoadBalance::kCacheAware, LoadBalance::kRoundRobin,
                        LoadBalance::kShortestQueue, LoadBalance::kMinimumTokens})
    EXPECT_EQ(parse_load_balance(load_balance_name(b)), b);
  EXPECT_EQ(load_balance_name(LoadBalance::kShortestQueue), std::string("shortest_queue"));
  EXPECT_EQ(load_balance_name(LoadBalance::kCacheAware), std::string("cache_aware"));
  EXPECT_FALSE(parse_load_balance("power_of_two").has_value());
  EXPECT_FALSE(parse_load_balance("").has_value());
}

TEST(AddReplicaStats, AddsCountsPoolsAndRatesAndMergesNames) {
  EngineStats a, b;
  a.running = 2;
  a.waiting = 1;
  a.steps = 10;
  a.prompt_tokens = 100;
  a.cached_prompt_tokens = 40;
  a.generated_tokens = 7;
  a.spec_accepted_per_position = {3, 1};
  a.last_step_unix_s = 50;
  a.generation_tokens_per_s = 12.5;
  a.full_pool = {.total_blocks = 10, .free_blocks = 4, .cached_blocks = 1};
  a.host_cache.enabled = true;
  a.host_cache.tier.saved.full = 3;
  a.running_loras = {"x", "y"};
  a.max_loras = 2;
  b.running = 3;
  b.steps = 5;
  b.prompt_tokens = 50;
  b.generated_tokens = 3;
  b.spec_accepted_per_position = {1, 1, 4};
  b.last_step_unix_s = 60;
  b.generation_tokens_per_s = 2.5;
  b.full_pool = {.total_blocks = 10, .free_blocks = 10, .cached_blocks = 0};
  b.host_cache.tier.saved.full = 2;
  b.running_loras = {"y", "z"};
  b.waiting_loras = {"w"};
  b.max_loras = 2;
  EngineStats total;
  add_replica_stats(a, total);
  add_replica_stats(b, total);
  EXPECT_EQ(total.running, 5);
  EXPECT_EQ(total.waiting, 1);
  EXPECT_EQ(total.steps, 15);
  EXPECT_EQ(total.prompt_tokens, 150);
  EXPECT_EQ(total.cached_prompt_tokens, 40);
  EXPECT_EQ(total.generated_tokens, 10);
  EXPECT_EQ(total.spec_accepted_per_position, (std::vector<int64_t>{4, 2, 4}));
  EXPECT_EQ(total.last_step_unix_s, 60);
  EXPECT_DOUBLE_EQ(total.generation_tokens_per_s, 15.0);
  EXPECT_EQ(total.full_pool.total_blocks, 20);
  EXPECT_EQ(total.full_pool.free_blocks, 14);
  EXPECT_EQ(total.full_pool.used_blocks(), 5);
  EXPECT_TRUE(total.host_cache.enabled);
  EXPECT_EQ(total.host_cache.tier.saved.full, 5);
  EXPECT_EQ(total.running_loras, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(total.waiting_loras, (std::vector<std::string>{"w"}));
  EXPECT_EQ(total.max_loras, 2);
}

}  // namespace
}  // namespace beam
