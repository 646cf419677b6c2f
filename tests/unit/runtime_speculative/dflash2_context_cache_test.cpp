// DFlash2ContextCache: the finished context sharing the longest token prefix, cut to it; LRU by
// bytes.
#include "runtime/speculative/dflash2_context_cache.h"

#include <gtest/gtest.h>

#include "core/bf16.h"

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

std::shared_ptr<DFlash2ContextPool> pool_of(const DFlash2Config& c, int64_t pages = 64) {
  auto pool = DFlash2ContextPool::create(KernelContext{}, c, pages);
  EXPECT_TRUE(pool.ok()) << pool.error().message;
  return pool.ok() ? *pool : nullptr;
}

// Layer 0's key row of `slot` (host memory).
bf16* key_of(const DFlash2Context& ctx, int64_t slot) {
  const TensorView k = ctx.pool().keys(0);
  return k.as<bf16>() + slot * k.dim(1) * k.dim(2);
}

// A context holding positions [0, n), each key row filled with its position.
std::shared_ptr<DFlash2Context> context_of(const std::shared_ptr<DFlash2ContextPool>& pool,
                                           int64_t n) {
  auto ctx = std::make_shared<DFlash2Context>(pool);
  for (int64_t p = 0; p < n; ++p) {
    const int64_t s = ctx->slot(p);
    key_of(*ctx, s)[0] = to_bf16(static_cast<float>(p));
    pool->set_position(s, p);
  }
  return ctx;
}

TEST(DFlash2ContextCache, TheLongestSharedPrefixIsCopiedAndCut) {
  const auto pool = pool_of(small_config());
  DFlash2ContextCache cache(1 << 20);
  cache.put({1, 2, 3, 4, 5, 6}, context_of(pool, 6));
  cache.put({1, 2, 9, 9}, context_of(pool, 4));
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 7, 7, 7};
  const auto copy = cache.copy_for(prompt);
  ASSERT_NE(copy, nullptr);
  for (int64_t p = 0; p < 4; ++p) {  // the shared prefix 1 2 3 4
    ASSERT_GE(copy->find(p), 0) << p;
    EXPECT_EQ(to_float(key_of(*copy, copy->find(p))[0]), static_cast<float>(p));
  }
  EXPECT_LT(copy->find(4), 0);
  EXPECT_LT(copy->find(5), 0);
  EXPECT_EQ(cache.copy_for(std::vector<int32_t>{8, 1, 2}), nullptr);  // nothing shared
}

TEST(DFlash2ContextCache, APrefixOlderThanTheRingGivesNothing) {
  const auto pool = pool_of(small_config());
  DFlash2ContextCache cache(1 << 20);
  std::vector<int32_t> tokens(60);
  for (int i = 0; i < 60; ++i) tokens[i] = i;
  // The ring (window 8 + block 2 in pages of 16: 2 pages) holds positions 32..59 and, in the
  // second page's slots 60..63 never overwrote, 28..31.
  cache.put(tokens, context_of(pool, 60));
  EXPECT_EQ(cache.copy_for(std::span<const int32_t>(tokens).first(28)), nullptr);
  const auto copy = cache.copy_for(std::span<const int32_t>(tokens).first(40));
  ASSERT_NE(copy, nullptr);
  EXPECT_GE(copy->find(39), 0);
  EXPECT_LT(copy->find(40), 0);
  EXPECT_LT(copy->find(20), 0);
}

// The bytes the cache budgets: the pages held, each with the K and V rows (Nkv * D bf16) of every
// layer and the positions (i64) of its 16 slots.
TEST(DFlash2ContextCache, AContextCountsEveryLayersKeysAndValues) {
  DFlash2Config c = small_config();
  c.num_layers = 3;
  c.num_kv_heads = 2;
  const auto pool = pool_of(c);
  DFlash2Context ctx(pool);
  ctx.slot(0);
  EXPECT_EQ(ctx.bytes(), 16 * (2 * 3 * (2 * 2) * 2 + 8));
  ctx.slot(17);
  EXPECT_EQ(ctx.bytes(), 2 * 16 * (2 * 3 * (2 * 2) * 2 + 8));
  EXPECT_EQ(pool->free_pages(), 62);
}

TEST(DFlash2ContextCache, TheLeastRecentlyUsedGoFirst) {
  const auto pool = pool_of(small_config());
  const int64_t one = context_of(pool, 4)->bytes();
  DFlash2ContextCache cache(2 * one);
  cache.put({1, 1}, context_of(pool, 4));
  cache.put({2, 2}, context_of(pool, 4));
  ASSERT_NE(cache.copy_for(std::vector<int32_t>{1, 1}), nullptr);  // {1, 1} is now the newest
  cache.put({3, 3}, context_of(pool, 4));
  EXPECT_EQ(cache.size(), 2);
  EXPECT_LE(cache.bytes(), 2 * one);
  EXPECT_EQ(cache.copy_for(std::vector<int32_t>{2, 2}), nullptr);
  EXPECT_NE(cache.copy_for(std::vector<int32_t>{1, 1}), nullptr);
  EXPECT_NE(cache.copy_for(std::vector<int32_t>{3, 3}), nullptr);
}

}  // namespace
}  // namespace beam

namespace beam {
namespace {

// Pages go back to the pool with their context and with an evicted cache entry; a clone of a
// context the pool cannot fully copy holds the pages it found, the rest absent.
TEST(DFlash2ContextPool, PagesReturnAndClonesDegradeWhenThePoolRunsOut) {
  DFlash2Config c = small_config();
  c.sliding_window = 0;  // no ring: a table grows with its sequence
  const auto pool = pool_of(c, 4);
  {
    const auto ctx = context_of(pool, 40);  // 3 pages
    EXPECT_EQ(pool->free_pages(), 1);
    const auto copy = ctx->clone();  // finds one page: positions 0..15
    EXPECT_EQ(pool->free_pages(), 0);
    EXPECT_GE(copy->find(15), 0);
    EXPECT_EQ(to_float(key_of(*copy, copy->find(15))[0]), 15.0f);
    EXPECT_LT(copy->find(16), 0);
    EXPECT_LT(copy->find(39), 0);
    auto more = std::make_shared<DFlash2Context>(pool);
    EXPECT_EQ(more->slot(0), -1);  // no page left
    DFlash2ContextCache cache(1 << 20);
    cache.put({1}, ctx);
    EXPECT_TRUE(cache.evict_oldest());
    EXPECT_FALSE(cache.evict_oldest());
  }
  EXPECT_EQ(pool->free_pages(), 4);
  // A page taken again holds nothing of its previous owner's.
  DFlash2Context fresh(pool);
  const int64_t s = fresh.slot(3);
  EXPECT_EQ(pool->position(s), -1);
  EXPECT_LT(fresh.find(3), 0);
}

}  // namespace
}  // namespace beam
