// HostKvTier alone, with a mover that records its copies: entries found only under their key,
// parent, salt and tokens; a block saved once per pool; each pool's slots evicted least recently
// used, loose blocks first and never over resumable ones; a key taken by another prefix left
// alone; clear; a pool without slots; chain keys.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "runtime/prefix_cache/host_kv_tier.h"

namespace beam {
namespace {

struct Copy {
  bool save;
  AttentionKind pool;
  int32_t block;
  int32_t slot;
  bool operator==(const Copy&) const = default;
};

class RecordingMover final : public HostBlockMover {
 public:
  void save(AttentionKind pool, BlockId block, int32_t slot) override {
    copies.push_back({true, pool, block.value, slot});
  }
  void load(AttentionKind pool, int32_t slot, BlockId block) override {
    copies.push_back({false, pool, block.value, slot});
  }
  std::vector<Copy> copies;
};

constexpr int64_t kBlock = 4;
constexpr AttentionKind kFull = AttentionKind::kFull;
constexpr AttentionKind kSliding = AttentionKind::kSliding;

// Block i of a chain under the root: tokens {i, i, i, i}.
struct Chain {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<ChainKey> keys;  // keys[0]: the root's
  explicit Chain(int n, uint64_t seed = 0) {
    keys.push_back(ChainKey{1, 2});
    for (int i = 0; i < n; ++i) {
      tokens.push_back(std::vector<int32_t>(kBlock, i + 10 * static_cast<int32_t>(seed)));
      keys.push_back(keys.back().extend(0x1000 + static_cast<uint64_t>(i) + 97 * seed));
    }
  }
  HostBlockRef ref(int i) const { return HostBlockRef{keys[i + 1], keys[i], 0, tokens[i]}; }
};

TEST(HostKvTierTest, ABlockSavedIsFoundUnderItsIdentityAndLoadsFromItsSlot) {
  RecordingMover mover;
  HostKvTier tier(kBlock, BlockCounts{4, 2}, mover);
  const Chain c(3);
  EXPECT_TRUE(tier.empty());
  const uint64_t g0 = tier.generation();
  tier.save(kFull, c.ref(1), BlockId(7));
  EXPECT_GT(tier.generation(), g0);
  const int32_t e = tier.find(c.ref(1));
  ASSERT_GE(e, 0);
  EXPECT_TRUE(tier.holds(e, kFull));
  EXPECT_FALSE(tier.holds(e, kSliding));
  EXPECT_EQ(tier.find(c.ref(0)), -1);
  HostBlockRef other_tokens = c.ref(1);
  const std::vector<int32_t> t{9, 9, 9, 9};
  other_tokens.tokens = t;
  EXPECT_EQ(tier.find(other_tokens), -1);
  HostBlockRef other_parent = c.ref(1);
  other_parent.parent = ChainKey{5, 5};
  EXPECT_EQ(tier.find(other_parent), -1);
  HostBlockRef salted = c.ref(1);
  salted.salt = 3;
  EXPECT_EQ(tier.find(salted), -1);
  tier.load(e, kFull, BlockId(2));
  const int32_t slot = mover.copies[0].slot;
  EXPECT_EQ(mover.copies, (std::vector<Copy>{{true, kFull, 7, slot}, {false, kFull, 2, slot}}));
  const HostTierStats s = tier.stats();
  EXPECT_EQ(s.capacity, (BlockCounts{4, 2}));
  EXPECT_EQ(s.used, (BlockCounts{1, 0}));
  EXPECT_EQ(s.saved, (BlockCounts{1, 0}));
  EXPECT_EQ(s.loaded, (BlockCounts{1, 0}));
  EXPECT_EQ(s.num_entries, 1);
  tier.check_integrity();
}

// A write-through copy (the device keeps the block) changes nothing a walk over device and host
// finds, so the generation (HostRestoreMemo's stamp) stays; a block the device let go bumps it.
TEST(HostKvTierTest, AWriteThroughCopyLeavesTheGenerationAlone) {
  RecordingMover mover;
  HostKvTier tier(kBlock, BlockCounts{4, 2}, mover);
  const Chain c(3);
  const uint64_t g0 = tier.generation();
  tier.save(kFull, c.ref(0), BlockId(5), HostRank::kDeviceCopy);
  tier.save(kSliding, c.ref(0), BlockId(5), HostRank::kDeviceCopy);
  EXPECT_EQ(tier.generation(), g0);
  EXPECT_EQ(mover.copies.size(), 2u);
  EXPECT_GE(tier.find(c.ref(0)), 0);
  tier.save(kFull, c.ref(1), BlockId(6));
  EXPECT_GT(tier.generation(), g0);
  tier.check_integrity();
}

TEST(HostKvTierTest, ABlockIsCopiedOncePerPool) {
  RecordingMover mover;
  HostKvTier tier(kBlock, BlockCounts{4, 2}, mover);
  const Chain c(1);
  tier.save(kFull, c.ref(0), BlockId(1));
  const uint64_t g = tier.generation();
  tier.save(kFull, c.ref(0), BlockId(5));  // the same prefix's block again: nothing to copy
  EXPECT_EQ(tier.generation(), g);
  tier.save(kSliding, c.ref(0), BlockId(3));
  ASSERT_EQ(mover.copies.size(), 2u);
  EXPECT_EQ(mover.copies[1].pool, kSliding);
  const int32_t e = tier.find(c.ref(0));
  EXPECT_TRUE(tier.holds(e, kFull) && tier.holds(e, kSliding));
  EXPECT_EQ(tier.stats().num_entries, 1);
  tier.check_integrity();
}

TEST(HostKvTierTest, EachPoolEvictsItsLeastRecentlyUsedSlot) {
  RecordingMover mover;
  HostKvTier tier(kBlock, BlockCounts{2, 1}, mover);
  const Chain c(4);
  tier.save(kFull, c.ref(0), BlockId(0));
  tier.save(kSliding, c.ref(0), BlockId(0));
  tier.save(kFull, c.ref(1), BlockId(1));
  tier.touch(tier.find(c.ref(0)));         // 0 is now the most recent
  tier.save(kFull, c.ref(2), BlockId(2));  // takes 1's slot: 1 had only that, so it goes
  EXPECT_EQ(tier.find(c.ref(1)), -1);
  ASSERT_GE(tier.find(c.ref(0)), 0);
  EXPECT_EQ(mover.copies.back().slot, mover.copies[2].slot);  // 1's slot reused
  tier.save(kFull, c.ref(3), BlockId(3));  // takes 0's full slot; 0 keeps its sliding one
  const int32_t e0 = tier.find(c.ref(0));
  ASSERT_GE(e0, 0);
  EXPECT_FALSE(tier.holds(e0, kFull));
  EXPECT_TRUE(tier.holds(e0, kSliding));
  tier.save(kSliding, c.ref(3), BlockId(3));  // the only sliding slot: 0 goes entirely
  EXPECT_EQ(tier.find(c.ref(0)), -1);
  EXPECT_EQ(tier.stats().used, (BlockCounts{2, 1}));
  EXPECT_EQ(tier.stats().num_entries, 2);
  tier.check_integrity();
}

// The blocks of c (by index) that tier holds an entry for.
std::vector<int> held(const HostKvTier& tier, const Chain& c) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(c.tokens.size()); ++i)
    if (tier.find(c.ref(i)) >= 0) out.push_back(i);
  return out;
}

// Write-through copies of blocks the device still holds go before anything else and never take
// another block's slot; the eviction's save of the same block ranks it up without a copy.
TEST(HostKvTierTest, DeviceCopiesGoFirstAndAnEvictionRanksThemUp) {
  RecordingMover mover;
  HostKvTier tier(kBlock, BlockCounts{2, 0}, mover);
  const Chain c(4);
  tier.save(kFull, c.ref(0), BlockId(0));                        // evicted from the device
  tier.save(kFull, c.ref(1), BlockId(1), HostRank::kDeviceCopy);  // a write-through copy
  tier.save(kFull, c.ref(2), BlockId(2), HostRank::kDeviceCopy);  // takes 1's slot (same rank)
  EXPECT_EQ(held(tier, c), (std::vector<int>{0, 2}));
  tier.save(kFull, c.ref(3), BlockId(3));  // an evicted block takes the copy's slot, not 0's
  EXPECT_EQ(held(tier, c), (std::vector<int>{0, 3}));
  HostKvTier up(kBlock, BlockCounts{2, 0}, mover);
  up.save(kFull, c.ref(0), BlockId(0), HostRank::kDeviceCopy);
  up.save(kFull, c.ref(1), BlockId(1), HostRank::kDeviceCopy);
  const size_t copies = mover.copies.size();
  up.save(kFull, c.ref(0), BlockId(0));  // its eviction: ranked up in place
  EXPECT_EQ(mover.copies.size(), copies);
  up.save(kFull, c.ref(2), BlockId(2));  // takes 1 (still a copy), keeps 0
  up.save(kFull, c.ref(3), BlockId(3), HostRank::kDeviceCopy);  // outranked everywhere: skipped
  EXPECT_EQ(held(up, c), (std::vector<int>{0, 2}));
  tier.check_integrity();
  up.check_integrity();
}

TEST(HostKvTierTest, LooseBlocksGoFirstAndNeverDisplaceResumableOnes) {
  RecordingMover mover;
  HostKvTier tier(kBlock, BlockCounts{0, 2}, mover);
  const Chain c(5);
  tier.save(kSliding, c.ref(0), BlockId(0));                   // resumable
  tier.save(kSliding, c.ref(1), BlockId(1), HostRank::kLoose);  // loose, more recent
  tier.save(kSliding, c.ref(2), BlockId(2));                   // takes the loose one's slot
  EXPECT_EQ(held(tier, c), (std::vector<int>{0, 2}));
  const size_t copies = mover.copies.size();
  tier.save(kSliding, c.ref(3), BlockId(3), HostRank::kLoose);  // every slot outranks it
  EXPECT_EQ(mover.copies.size(), copies);
  EXPECT_EQ(tier.stats().saved, (BlockCounts{0, 3}));  // 0, 1 and 2; not 3
  // A loose block saved again as resumable is ranked up in place (no copy); then only the
  // least recently used resumable block is taken.
  tier.save(kSliding, c.ref(0), BlockId(0));
  tier.save(kSliding, c.ref(4), BlockId(4), HostRank::kLoose);  // still nothing loose to take
  EXPECT_EQ(held(tier, c), (std::vector<int>{0, 2}));
  HostKvTier ranked(kBlock, BlockCounts{0, 2}, mover);
  ranked.save(kSliding, c.ref(0), BlockId(0), HostRank::kLoose);
  ranked.save(kSliding, c.ref(1), BlockId(1), HostRank::kLoose);
  const size_t before = mover.copies.size();
  ranked.save(kSliding, c.ref(0), BlockId(0));  // ranked up: 1 is now the one to go
  EXPECT_EQ(mover.copies.size(), before);
  ranked.save(kSliding, c.ref(2), BlockId(2), HostRank::kLoose);
  EXPECT_EQ(held(ranked, c), (std::vector<int>{0, 2}));
  ranked.save(kSliding, c.ref(3), BlockId(3));  // resumable: takes the loose one (2), not 0
  EXPECT_EQ(held(ranked, c), (std::vector<int>{0, 3}));
  tier.check_integrity();
  ranked.check_integrity();
}

TEST(HostKvTierTest, AKeyHeldByAnotherPrefixIsLeftAlone) {
  RecordingMover mover;
  HostKvTier tier(kBlock, BlockCounts{4, 4}, mover);
  const Chain c(1);
  tier.save(kFull, c.ref(0), BlockId(0));
  HostBlockRef impostor = c.ref(0);  // the same 128 key bits, other tokens
  const std::vector<int32_t> t{7, 7, 7, 7};
  impostor.tokens = t;
  tier.save(kSliding, impostor, BlockId(1));
  EXPECT_EQ(mover.copies.size(), 1u);
  EXPECT_EQ(tier.find(impostor), -1);
  EXPECT_FALSE(tier.holds(tier.find(c.ref(0)), kSliding));
  tier.check_integrity();
}

TEST(HostKvTierTest, ClearForgetsEverythingAndAPoolWithoutSlotsSavesNothing) {
  RecordingMover mover;
  HostKvTier tier(kBlock, BlockCounts{3, 0}, mover);
  const Chain c(3);
  for (int i = 0; i < 3; ++i) {
    tier.save(kFull, c.ref(i), BlockId(i));
    tier.save(kSliding, c.ref(i), BlockId(i));  // no sliding slots: ignored
  }
  EXPECT_EQ(mover.copies.size(), 3u);
  EXPECT_EQ(tier.stats().used, (BlockCounts{3, 0}));
  const uint64_t g = tier.generation();
  tier.clear();
  EXPECT_GT(tier.generation(), g);
  EXPECT_TRUE(tier.empty());
  EXPECT_EQ(tier.stats().used, (BlockCounts{}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tier.find(c.ref(i)), -1);
  tier.check_integrity();
  tier.save(kFull, c.ref(0), BlockId(0));  // every slot is free again
  EXPECT_EQ(tier.stats().used, (BlockCounts{1, 0}));
  tier.check_integrity();
}

TEST(HostKvTierTest, ChainKeysDependOnEveryBlockAndTheirOrder) {
  const ChainKey root{1, 2};
  EXPECT_NE(root.extend(5), root.extend(6));
  EXPECT_NE(root.extend(5).extend(6), root.extend(6).extend(5));
  EXPECT_EQ(root.extend(5).extend(6), root.extend(5).extend(6));
  EXPECT_NE(root.extend(5).hi, root.extend(5).lo);
}

}  // namespace
}  // namespace beam
