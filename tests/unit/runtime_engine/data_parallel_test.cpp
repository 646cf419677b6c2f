// ReplicaBalancer (which data-parallel replica takes a request) and add_replica_stats (one
// EngineStats over the replicas): the policies' picks, ties in turn, pinned requests, releases,
// the policies' names.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/data_parallel.h"

namespace beam {
namespace {

std::vector<int> picks(ReplicaBalancer& b, int count, int64_t tokens = 10) {
  std::vector<int> out;
  for (int i = 0; i < count; ++i) out.push_back(b.take(tokens));
  return out;
}

TEST(ReplicaBalancer, RoundRobinTakesTheReplicasInTurn) {
  ReplicaBalancer b(3, LoadBalance::kRoundRobin);
  EXPECT_EQ(picks(b, 7), (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
  b.release(1, 10);  // load does not matter to it
  EXPECT_EQ(b.take(10), 1);
}

TEST(ReplicaBalancer, ShortestQueueTakesTheFewestRequestsTiesInTurn) {
  ReplicaBalancer b(3, LoadBalance::kShortestQueue);
  EXPECT_EQ(picks(b, 3), (std::vector<int>{0, 1, 2}));  // all tied: in turn
  b.release(1, 10);
  b.release(0, 10);
  // Replicas 0 and 1 hold none, 2 holds one: the tie between 0 and 1 starts after the last taken.
  EXPECT_EQ(b.take(10), 0);
  EXPECT_EQ(b.take(10), 1);
  EXPECT_EQ(b.take(10), 2);
  std::vector<ReplicaBalancer::Load> loads = b.loads();
  ASSERT_EQ(loads.size(), 3u);
  EXPECT_EQ(loads[0].requests, 1);
  EXPECT_EQ(loads[1].requests, 1);
  EXPECT_EQ(loads[2].requests, 2);
  // Requests count, not their tokens: a long one on replica 0 leaves it as loaded as replica 1.
  b.release(0, 10);
  EXPECT_EQ(b.take(1000), 0);  // 1, 1, 2
  EXPECT_EQ(b.take(1), 1);     // tied with 0: after the last taken
  EXPECT_EQ(b.take(1), 0);     // 1 against 2 and 2
  loads = b.loads();
  EXPECT_EQ(loads[0].tokens, 1001);
  EXPECT_EQ(loads[0].requests, 2);
}

TEST(ReplicaBalancer, MinimumTokensTakesTheFewestTokens) {
  ReplicaBalancer b(2, LoadBalance::kMinimumTokens);
  EXPECT_EQ(b.take(1000), 0);
  EXPECT_EQ(b.take(10), 1);
  EXPECT_EQ(b.take(10), 1);  // 20 tokens against 1,000
  EXPECT_EQ(b.take(980), 1);  // 20 against 1,000
  EXPECT_EQ(b.take(5), 0);    // 1,000 against 1,000: a tie, after the last taken
  b.release(0, 1000);
  b.release(0, 5);
  EXPECT_EQ(b.take(5), 0);
  EXPECT_EQ(b.loads()[1].tokens, 1000);
  EXPECT_EQ(b.loads()[1].requests, 3);
}

TEST(ReplicaBalancer, PinnedRequestsCountButDoNotMoveTheTurn) {
  ReplicaBalancer b(2, LoadBalance::kRoundRobin);
  EXPECT_EQ(b.take(10, 1), 1);
  EXPECT_EQ(b.take(10, 1), 1);
  EXPECT_EQ(b.take(10), 0);
  EXPECT_EQ(b.take(10), 1);
  EXPECT_EQ(b.loads()[1].requests, 3);
  ReplicaBalancer q(2, LoadBalance::kShortestQueue);
  EXPECT_EQ(q.take(10, 0), 0);
  EXPECT_EQ(q.take(10, 0), 0);
  EXPECT_EQ(q.take(10), 1);  // the shorter queue
  EXPECT_EQ(q.take(10), 1);
  EXPECT_EQ(q.take(10), 0);  // tied at 2: after the last taken
}

TEST(LoadBalance, NamesRoundTrip) {
  for (LoadBalance b :
       {LoadBalance::kRoundRobin, LoadBalance::kShortestQueue, LoadBalance::kMinimumTokens})
    EXPECT_EQ(parse_load_balance(load_balance_name(b)), b);
  EXPECT_EQ(load_balance_name(LoadBalance::kShortestQueue), std::string("shortest_queue"));
  EXPECT_FALSE(parse_load_balance("cache_aware").has_value());
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
