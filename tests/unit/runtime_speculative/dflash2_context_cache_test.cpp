// DFlash2ContextCache: the finished context sharing the longest token prefix, cut to it; LRU by
// bytes.
#include "runtime/speculative/dflash2_context_cache.h"

#include <gtest/gtest.h>

namespace beam {
namespace {

DFlash2Config small_config() {
  DFlash2Config c;
  c.hidden_size = 16;
  c.num_layers = 1;
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 2;
  c.sliding_window = 8;
  c.block_size = 2;
  return c;
}

// A context holding positions [0, n), each key row filled with its position.
std::shared_ptr<DFlash2Context> context_of(int64_t n) {
  auto ctx = std::make_shared<DFlash2Context>(small_config());
  for (int64_t p = 0; p < n; ++p) {
    const int64_t s = ctx->slot(p);
    ctx->key(0, s)[0] = to_bf16(static_cast<float>(p));
    ctx->set_position(s, p);
  }
  return ctx;
}

TEST(DFlash2ContextCache, TheLongestSharedPrefixIsCopiedAndCut) {
  DFlash2ContextCache cache(1 << 20);
  cache.put({1, 2, 3, 4, 5, 6}, context_of(6));
  cache.put({1, 2, 9, 9}, context_of(4));
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 7, 7, 7};
  const auto copy = cache.copy_for(prompt);
  ASSERT_NE(copy, nullptr);
  for (int64_t p = 0; p < 4; ++p) {  // the shared prefix 1 2 3 4
    ASSERT_GE(copy->find(p), 0) << p;
    EXPECT_EQ(to_float(copy->key(0, copy->find(p))[0]), static_cast<float>(p));
  }
  EXPECT_LT(copy->find(4), 0);
  EXPECT_LT(copy->find(5), 0);
  EXPECT_EQ(cache.copy_for(std::vector<int32_t>{8, 1, 2}), nullptr);  // nothing shared
}

TEST(DFlash2ContextCache, APrefixOlderThanTheRingGivesNothing) {
  DFlash2ContextCache cache(1 << 20);
  std::vector<int32_t> tokens(30);
  for (int i = 0; i < 30; ++i) tokens[i] = i;
  cache.put(tokens, context_of(30));  // the ring (8 + 2) holds positions 20..29
  EXPECT_EQ(cache.copy_for(std::span<const int32_t>(tokens).first(15)), nullptr);
  const auto copy = cache.copy_for(std::span<const int32_t>(tokens).first(25));
  ASSERT_NE(copy, nullptr);
  EXPECT_GE(copy->find(24), 0);
  EXPECT_LT(copy->find(25), 0);
}

// The bytes the cache budgets: K and V rows (Nkv * D bf16) of each layer's slots; the ring of
// window 8 + block 2 holds 10 slots.
TEST(DFlash2ContextCache, AContextCountsEveryLayersKeysAndValues) {
  DFlash2Config c = small_config();
  c.num_layers = 3;
  c.num_kv_heads = 2;
  DFlash2Context ctx(c);
  ctx.slot(0);
  EXPECT_EQ(ctx.capacity(), 10);
  EXPECT_EQ(ctx.bytes(), 2 * 3 * 10 * (2 * 2) * 2);
}

TEST(DFlash2ContextCache, TheLeastRecentlyUsedGoFirst) {
  const int64_t one = context_of(4)->bytes();
  DFlash2ContextCache cache(2 * one);
  cache.put({1, 1}, context_of(4));
  cache.put({2, 2}, context_of(4));
  ASSERT_NE(cache.copy_for(std::vector<int32_t>{1, 1}), nullptr);  // {1, 1} is now the newest
  cache.put({3, 3}, context_of(4));
  EXPECT_EQ(cache.size(), 2);
  EXPECT_LE(cache.bytes(), 2 * one);
  EXPECT_EQ(cache.copy_for(std::vector<int32_t>{2, 2}), nullptr);
  EXPECT_NE(cache.copy_for(std::vector<int32_t>{1, 1}), nullptr);
  EXPECT_NE(cache.copy_for(std::vector<int32_t>{3, 3}), nullptr);
}

}  // namespace
}  // namespace beam
