// KvCacheTest: block pool accounting, sequence tables, sliding-window release, forks, storage,
// and the budget split between the pools.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/kv_cache/block_pool.h"
#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/kv_cache/kv_geometry.h"
#include "runtime/kv_cache/kv_storage.h"

namespace beam {
namespace {

KvCacheManager make_kv(int64_t block, int64_t window, int32_t full, int32_t sliding) {
  Expected<KvCacheManager> kv = KvCacheManager::create(KvCacheConfig{block, window, full, sliding});
  EXPECT_TRUE(kv.ok()) << kv.error().message;
  return std::move(kv).value();
}

void check(const KvCacheManager& kv) {
  kv.check_integrity(std::vector<int32_t>(kv.total_blocks().full, 0),
                     std::vector<int32_t>(kv.total_blocks().sliding, 0));
}

TEST(KvCacheTest, BlockPoolRefCountsAndFreeList) {
  BlockPool pool(4);
  EXPECT_EQ(pool.num_free(), 4);
  const BlockId a = pool.allocate(), b = pool.allocate();
  EXPECT_EQ(a.value, 0);
  EXPECT_EQ(b.value, 1);
  pool.add_ref(a);
  EXPECT_EQ(pool.ref_count(a), 2);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 2);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 3);
  pool.check_integrity(std::vector<int32_t>{0, 1, 0, 0}, "test");
  pool.release(b);
  EXPECT_EQ(pool.num_free(), pool.num_total());
}

TEST(KvCacheTest, CreateRejectsBadConfig) {
  EXPECT_FALSE(KvCacheManager::create(KvCacheConfig{0, 8, 4, 4}).ok());
  EXPECT_FALSE(KvCacheManager::create(KvCacheConfig{4, 0, 4, 4}).ok());
  Expected<KvCacheManager> bad = KvCacheManager::create(KvCacheConfig{4, 8, 0, 4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("both pools"), std::string::npos);
}

TEST(KvCacheTest, WindowBlockArithmetic) {
  // W = 512, B = 64: a query at slot p sees keys p-511..p.
  EXPECT_EQ(first_visible_block(0, 512, 64), 0);
  EXPECT_EQ(first_visible_block(511, 512, 64), 0);
  EXPECT_EQ(first_visible_block(512, 512, 64), 0);  // key 1 is in block 0
  EXPECT_EQ(first_visible_block(575, 512, 64), 1);  // keys 64..575
  // A prefix of 1024 tokens resumes with keys 513..1023: blocks 8..15.
  EXPECT_EQ(first_visible_block(1024, 512, 64), 8);
  EXPECT_EQ(first_kept_sliding_block(1024 + 63, 512, 64), 8);
  EXPECT_EQ(blocks_for_tokens(65, 64), 2);
}

TEST(KvCacheTest, ReserveAdvanceAndFree) {
  KvCacheManager kv = make_kv(4, 8, 16, 16);
  const SeqId s(1);
  kv.add_sequence(s);
  EXPECT_EQ(kv.blocks_needed(s, 9), (BlockCounts{3, 3}));
  kv.reserve(s, 9);
  check(kv);
  EXPECT_EQ(kv.full_table(s).size(), 3u);
  kv.advance(s, 9);
  EXPECT_EQ(kv.num_computed(s), 9);
  EXPECT_EQ(kv.blocks_needed(s, 12), (BlockCounts{0, 0}));
  kv.free_sequence(s);
  check(kv);
  EXPECT_EQ(kv.free_blocks(), kv.total_blocks());
}

TEST(KvCacheTest, SlidingBlocksReleasedDuringLongPrefillAndDecode) {
  const int64_t B = 4, W = 8;
  KvCacheManager kv = make_kv(B, W, 256, 64);
  const SeqId s(7);
  kv.add_sequence(s);
  int64_t max_sliding = 0;
  // Prefill 200 tokens in chunks of 13, then decode 10x the window token by token.
  auto step = [&](int64_t n) {
    kv.reserve(s, kv.num_computed(s) + n);
    max_sliding = std::max(max_sliding, kv.held_blocks(s).sliding);
    kv.advance(s, n);
    const int64_t first = kv.release_out_of_window(s);
    check(kv);
    const std::span<const int32_t> sl = kv.sliding_table(s);
    for (int64_t i = 0; i < static_cast<int64_t>(sl.size()); ++i)
      ASSERT_EQ(sl[i] >= 0, i >= first) << "block " << i << " at " << kv.num_computed(s);
  };
  for (int64_t done = 0; done < 200; done += 13) step(std::min<int64_t>(13, 200 - done));
  for (int64_t i = 0; i < 10 * W; ++i) step(1);
  EXPECT_EQ(kv.num_computed(s), 200 + 10 * W);
  // Window + one block + the chunk in flight, whatever the context length.
  EXPECT_LE(max_sliding, blocks_for_tokens(W - 1, B) + 2 + blocks_for_tokens(13, B));
  EXPECT_EQ(kv.held_blocks(s).full, blocks_for_tokens(200 + 10 * W, B));
  kv.free_sequence(s);
  check(kv);
  EXPECT_EQ(kv.free_blocks(), kv.total_blocks());
}

TEST(KvCacheTest, ForkSharesFullBlocksAndCopiesPartialLastBlock) {
  KvCacheManager kv = make_kv(4, 8, 32, 32);
  const SeqId p(1), c(2), d(3);
  kv.add_sequence(p);
  kv.reserve(p, 10);
  kv.advance(p, 10);
  kv.release_out_of_window(p);
  EXPECT_EQ(kv.fork_cost(p), (BlockCounts{1, 1}));
  std::vector<BlockCopy> copies;
  kv.fork(p, c, &copies);
  check(kv);
  ASSERT_EQ(copies.size(), 2u);
  const auto pf = kv.full_table(p), cf = kv.full_table(c);
  EXPECT_EQ(pf[0], cf[0]);
  EXPECT_EQ(pf[1], cf[1]);
  EXPECT_NE(pf[2], cf[2]);
  EXPECT_EQ(copies[0].src.value, pf[2]);
  EXPECT_EQ(copies[0].dst.value, cf[2]);
  EXPECT_EQ(kv.block_ref_count(AttentionKind::kFull, BlockId(pf[0])), 2);
  EXPECT_EQ(kv.exclusive_blocks(c), (BlockCounts{1, 1}));
  // Aligned: nothing to copy.
  kv.reserve(p, 12);
  kv.advance(p, 2);
  EXPECT_EQ(kv.fork_cost(p), (BlockCounts{0, 0}));
  copies.clear();
  kv.fork(p, d, &copies);
  EXPECT_TRUE(copies.empty());
  check(kv);
  for (SeqId s : {p, c, d}) kv.free_sequence(s);
  check(kv);
  EXPECT_EQ(kv.free_blocks(), kv.total_blocks());
}

TEST(KvCacheTest, TruncateRollsBackReservedBlocks) {
  KvCacheManager kv = make_kv(4, 8, 32, 32);
  const SeqId s(1);
  kv.add_sequence(s);
  kv.reserve(s, 6);
  kv.advance(s, 6);
  kv.reserve(s, 11);  // 1 + 4 speculative tokens
  kv.advance(s, 5);
  kv.truncate(s, 7);  // two accepted
  check(kv);
  EXPECT_EQ(kv.num_computed(s), 7);
  EXPECT_EQ(kv.full_table(s).size(), 2u);
  kv.free_sequence(s);
  EXPECT_EQ(kv.free_blocks(), kv.total_blocks());
}

KvGeometry test_geometry() {
  KvGeometry g;
  g.block_size_tokens = 4;
  g.sliding_window_tokens = 8;
  g.num_kv_heads = 2;
  g.head_dim = 3;
  g.layer_types = {AttentionKind::kSliding, AttentionKind::kFull, AttentionKind::kSliding};
  return g;
}

TEST(KvCacheTest, StorageLayersPointIntoTheirPoolsAndCopyBlocks) {
  const KvGeometry g = test_geometry();
  HostKvAllocator alloc;
  Expected<KvStorage> st = KvStorage::create(g, KvPoolSizes{5, 3}, alloc);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const KvLayers& layers = st->layers();
  ASSERT_EQ(layers.layers.size(), 3u);
  EXPECT_EQ(layers.layers[1].k.shape, (Shape{5, 4, 2, 3}));
  EXPECT_EQ(layers.layers[0].k.shape, (Shape{3, 4, 2, 3}));
  EXPECT_EQ(layers.layers[0].k.dtype, DType::kBF16);
  EXPECT_EQ(st->bytes(AttentionKind::kSliding), 2 * 2 * 3 * 4 * 2 * 3 * 2);
  // Distinct, non-overlapping tensors: fill block 1 of sliding layer 2 and copy it to block 0.
  const int64_t per_block = 4 * 2 * 3;
  uint16_t* k2 = static_cast<uint16_t*>(layers.layers[2].k.data);
  uint16_t* v2 = static_cast<uint16_t*>(layers.layers[2].v.data);
  for (int64_t i = 0; i < per_block; ++i) {
    k2[per_block + i] = static_cast<uint16_t>(i + 1);
    v2[per_block + i] = static_cast<uint16_t>(i + 100);
  }
  const BlockCopy copy{AttentionKind::kSliding, BlockId(1), BlockId(0)};
  st->copy_blocks(std::span<const BlockCopy>(&copy, 1));
  for (int64_t i = 0; i < per_block; ++i) {
    EXPECT_EQ(k2[i], i + 1);
    EXPECT_EQ(v2[i], i + 100);
  }
}

TEST(KvCacheTest, PoolSplitFollowsTheDocumentedRule) {
  const KvGeometry g = test_geometry();
  EXPECT_EQ(g.bytes_per_token(AttentionKind::kFull), 1 * 2 * 2 * 3 * 2);
  EXPECT_EQ(g.bytes_per_token(AttentionKind::kSliding), 2 * 2 * 2 * 3 * 2);
  KvPoolSplit split{2, 16, 0.5};
  const int64_t full_bb = g.bytes_per_block(AttentionKind::kFull);     // 96
  const int64_t sliding_bb = g.bytes_per_block(AttentionKind::kSliding);  // 192
  Expected<KvPoolSizes> sizes = plan_kv_pools(g, 100000, split);
  ASSERT_TRUE(sizes.ok()) << sizes.error().message;
  const int64_t live = 2 * (2 + 2) + 4;  // per seq ceil(7/4)+2, plus 16/4 chunk blocks
  const int64_t full = (100000 - live * sliding_bb) / (full_bb + sliding_bb / 2);
  EXPECT_EQ(sizes->num_full_blocks, full);
  EXPECT_EQ(sizes->num_sliding_blocks, live + full / 2);
  EXPECT_LE(kv_pool_bytes(g, *sizes), 100000);
  Expected<KvPoolSizes> tiny = plan_kv_pools(g, 1000, split);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message.find("running sequences"), std::string::npos);
}

// A ring pool (the DFlash2 drafter's context): every running sequence's whole ring and the
// cached share come off the budget before the full blocks.
TEST(KvCacheTest, RingPoolTakesEverySequencesRingAndACachedShare) {
  const KvGeometry g = test_geometry();
  KvPoolSplit split{2, 16, 0.5};
  split.ring = KvRingPool{.page_bytes = 40, .page_tokens = 2, .pages_per_seq = 3, .fixed_pages = 1};
  const int64_t full_bb = g.bytes_per_block(AttentionKind::kFull);        // 96
  const int64_t sliding_bb = g.bytes_per_block(AttentionKind::kSliding);  // 192
  Expected<KvPoolSizes> sizes = plan_kv_pools(g, 100000, split);
  ASSERT_TRUE(sizes.ok()) << sizes.error().message;
  const int64_t live = 2 * (2 + 2) + 4;
  const int64_t live_ring = 2 * 3 + 1;
  // A full block (4 tokens) brings half a block's sliding windows and a quarter of its tokens'
  // ring pages (4 / 2 x 0.5 = 1 page).
  const int64_t full =
      (100000 - live * sliding_bb - live_ring * 40) / (full_bb + sliding_bb / 2 + 40);
  EXPECT_EQ(sizes->num_full_blocks, full);
  EXPECT_EQ(sizes->num_sliding_blocks, live + full / 2);
  EXPECT_EQ(sizes->num_ring_pages, live_ring + full);
  EXPECT_LE(kv_pool_bytes(g, *sizes) + sizes->num_ring_pages * 40, 100000);
  split.ring = {};
  EXPECT_EQ(plan_kv_pools(g, 100000, split)->num_ring_pages, 0);
}

// Rings hold no more positions than the full blocks do: with rings too big for the budget, the
// live ring pages follow the full blocks' tokens.
TEST(KvCacheTest, RingsLargerThanTheFullPoolFollowItsTokens) {
  const KvGeometry g = test_geometry();
  KvPoolSplit split{2, 16, 0.5};
  split.ring =
      KvRingPool{.page_bytes = 8, .page_tokens = 2, .pages_per_seq = 100000, .fixed_pages = 1};
  const int64_t full_bb = g.bytes_per_block(AttentionKind::kFull);
  const int64_t sliding_bb = g.bytes_per_block(AttentionKind::kSliding);
  Expected<KvPoolSizes> sizes = plan_kv_pools(g, 100000, split);
  ASSERT_TRUE(sizes.ok()) << sizes.error().message;
  const int64_t live = 2 * (2 + 2) + 4;
  // A full block: its 2 live pages and 1 cached page of ring.
  const int64_t full = (100000 - live * sliding_bb - 8) / (full_bb + sliding_bb / 2 + 3 * 8);
  EXPECT_EQ(sizes->num_full_blocks, full);
  EXPECT_EQ(sizes->num_ring_pages, 1 + 3 * full);
  EXPECT_LE(kv_pool_bytes(g, *sizes) + sizes->num_ring_pages * 8, 100000);
  // Pages as big as the budget's quarter allows: the ring pool is capped there.
  split.ring.page_bytes = 2000;
  Expected<KvPoolSizes> capped = plan_kv_pools(g, 100000, split);
  ASSERT_TRUE(capped.ok()) << capped.error().message;
  EXPECT_EQ(capped->num_ring_pages, 25000 / 2000);
  EXPECT_EQ(capped->num_full_blocks,
            (100000 - live * sliding_bb - 12 * 2000) / (full_bb + sliding_bb / 2));
  split.ring.page_tokens = 0;
  Expected<KvPoolSizes> bad = plan_kv_pools(g, 100000, split);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("page_tokens"), std::string::npos);
}

TEST(KvCacheTest, PoolsOverTwoTo31CacheRowsAreRejected) {
  KvGeometry g = test_geometry();
  g.num_kv_heads = 8;
  g.head_dim = 64;
  g.block_size_tokens = 64;
  const KvPoolSplit split{2, 64, 0.0};
  const int64_t full_bb = g.bytes_per_block(AttentionKind::kFull);
  const int64_t sliding_bb = g.bytes_per_block(AttentionKind::kSliding);
  const int64_t live = 2 * (1 + 2) + 1;  // 2 seqs x (ceil(7 / 64) + 2) + ceil(64 / 64)
  // The most full blocks whose rows (blocks x 64 x 8) stay under 2^31: 2^22 - 1.
  const int64_t fits = (int64_t{1} << 22) - 1;
  Expected<KvPoolSizes> ok = plan_kv_pools(g, fits * full_bb + live * sliding_bb, split);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_LE(int64_t{ok->num_full_blocks} * 64 * 8, std::numeric_limits<int32_t>::max());
  Expected<KvPoolSizes> over = plan_kv_pools(g, (fits + 2) * full_bb + live * sliding_bb, split);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("2^31"), std::string::npos) << over.error().message;
  EXPECT_NE(over.error().message.find("--kv-budget-mb"), std::string::npos);
}

TEST(KvCacheTest, GeometryFromConfigCountsLayersPerPool) {
  BeamConfig c;
  c.num_layers = 4;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.sliding_window = 512;
  c.layer_types = {AttentionKind::kSliding, AttentionKind::kSliding, AttentionKind::kSliding,
                   AttentionKind::kFull};
  Expected<KvGeometry> g = kv_geometry_from_config(c, 64);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->bytes_per_token(AttentionKind::kFull), c.kv_bytes_per_token_per_layer());
  EXPECT_EQ(g->bytes_per_token(AttentionKind::kSliding), 3 * c.kv_bytes_per_token_per_layer());
  c.layer_types.back() = AttentionKind::kSliding;
  EXPECT_FALSE(kv_geometry_from_config(c, 64).ok());
}

}  // namespace
}  // namespace beam
