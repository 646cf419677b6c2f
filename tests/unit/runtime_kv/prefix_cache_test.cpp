// PrefixCacheTest: match / insert / lock / evict / tombstone / heal semantics of the
// window-aware radix prefix cache, with check_integrity() after every operation.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/prefix_cache/prefix_cache.h"
#include "runtime/scheduler/step_commit.h"

namespace beam {
namespace {

constexpr int64_t kB = 4;  // block size
constexpr int64_t kW = 8;  // window: a resumable prefix needs the 2 blocks before it

std::vector<int32_t> seq_tokens(int32_t start, int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class PrefixCacheTest : public ::testing::Test {
 protected:
  void make(int32_t full, int32_t sliding, int64_t checkpoint = 0) {
    kv_ = std::make_unique<KvCacheManager>(
        KvCacheManager::create(KvCacheConfig{kB, kW, full, sliding}).value());
    pc_ = std::make_unique<PrefixCache>(*kv_, PrefixCacheConfig{checkpoint});
  }
  void SetUp() override { make(256, 128); }

  // Acquires the match of `tokens` for a new sequence and computes the rest in chunks,
  // evicting as needed; returns the matched length. The sequence stays alive.
  int64_t start(SeqId id, const std::vector<int32_t>& tokens, int64_t chunk = 5) {
    const PrefixMatch m = pc_->match(tokens);
    kv_->add_sequence(id);
    if (m.num_tokens > 0) pc_->acquire(id, m);
    pc_->check_integrity();
    for (int64_t c = m.num_tokens; c < static_cast<int64_t>(tokens.size());) {
      const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(tokens.size()) - c);
      pc_->evict_until_free(kv_->blocks_needed(id, c + n));
      kv_->reserve(id, c + n);
      complete_work(SeqWork{id, tokens, WorkKind::kPrefill, c, n, false}, n, *kv_, pc_.get());
      pc_->check_integrity();
      c += n;
    }
    return m.num_tokens;
  }
  void finish(SeqId id, const std::vector<int32_t>& tokens) {
    pc_->insert(id, tokens);
    pc_->release(id);
    kv_->free_sequence(id);
    pc_->check_integrity();
  }
  int64_t run(SeqId id, const std::vector<int32_t>& tokens, int64_t chunk = 5) {
    const int64_t hit = start(id, tokens, chunk);
    finish(id, tokens);
    return hit;
  }
  void expect_all_free() {
    pc_->flush();
    pc_->check_integrity();
    EXPECT_EQ(pc_->stats().num_nodes, 0);
    EXPECT_EQ(kv_->free_blocks(), kv_->total_blocks());
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<PrefixCache> pc_;
};

TEST_F(PrefixCacheTest, EmptyTreeMatchesNothing) {
  EXPECT_EQ(pc_->match(seq_tokens(0, 40)).num_tokens, 0);
  EXPECT_EQ(pc_->match({}).num_tokens, 0);
  pc_->check_integrity();
}

TEST_F(PrefixCacheTest, InsertThenMatchAndLastTokenIsRecomputed) {
  const auto t = seq_tokens(1, 40);
  EXPECT_EQ(run(SeqId(1), t), 0);
  EXPECT_EQ(pc_->stats().num_nodes, 10);
  EXPECT_EQ(pc_->stats().held.sliding, 2);  // only the window before 40
  EXPECT_EQ(pc_->match(concat(t, seq_tokens(500, 5))).num_tokens, 40);
  // The identical prompt: its last token must be recomputed for logits, and 36's window is gone.
  EXPECT_EQ(pc_->match(t).num_tokens, 0);
  EXPECT_EQ(pc_->match(concat(t, {7})).num_tokens, 40);
  // Another first block: nothing.
  EXPECT_EQ(pc_->match(seq_tokens(2, 40)).num_tokens, 0);
  expect_all_free();
}

TEST_F(PrefixCacheTest, PartialBlocksAreNotCached) {
  const auto t = seq_tokens(1, 42);
  run(SeqId(1), t);
  EXPECT_EQ(pc_->stats().num_nodes, 10);  // 40 of 42 computed tokens are whole blocks
  EXPECT_EQ(pc_->match(concat(t, {9})).num_tokens, 40);
  expect_all_free();
}

TEST_F(PrefixCacheTest, LongPrefixWithoutWindowCutsBackToLastIntactWindow) {
  const auto t = seq_tokens(1, 100);
  const std::vector<int32_t> a(t.begin(), t.begin() + 48);
  run(SeqId(1), a);                                     // endpoint at 48
  EXPECT_EQ(run(SeqId(2), concat(t, {0})), 48);         // extends it to 101 → endpoint at 100
  EXPECT_EQ(pc_->stats().num_endpoints, 2);
  // The path holds 80 tokens of this prompt, but the window before 80 (and every point after
  // 48) was released while the sequence moved on: the hit is cut back to 48.
  const std::vector<int32_t> p80 = concat(std::vector<int32_t>(t.begin(), t.begin() + 80), seq_tokens(900, 9));
  EXPECT_EQ(pc_->match(p80).num_tokens, 48);
  // Diverging before 48 with no intact window on the way: nothing.
  EXPECT_EQ(pc_->match(concat(std::vector<int32_t>(t.begin(), t.begin() + 40), seq_tokens(900, 9))).num_tokens, 0);
  EXPECT_EQ(pc_->match(concat(t, seq_tokens(900, 9))).num_tokens, 100);
  expect_all_free();
}

TEST_F(PrefixCacheTest, InsertHealsTombstonesInsideTheNewWindow) {
  const auto t = seq_tokens(1, 100);
  run(SeqId(1), std::vector<int32_t>(t.begin(), t.begin() + 48));
  run(SeqId(2), concat(t, {0}));
  const std::vector<int32_t> p81(t.begin(), t.begin() + 81);
  EXPECT_EQ(pc_->match(concat(p81, {5})).num_tokens, 48);
  // A sequence recomputes 48..81: its window before 80 revives the tombstoned nodes.
  const int64_t held = pc_->stats().held.sliding;
  EXPECT_EQ(run(SeqId(3), p81), 48);
  EXPECT_EQ(pc_->stats().held.sliding, held + 2);
  EXPECT_EQ(pc_->match(concat(p81, {5})).num_tokens, 80);
  EXPECT_EQ(pc_->stats().num_nodes, 25);  // no duplicate nodes
  expect_all_free();
}

TEST_F(PrefixCacheTest, LocksProtectInFlightPrefixesAndOnlyTheWindowIsSlidingLocked) {
  const auto t = seq_tokens(1, 40);
  run(SeqId(1), t);
  const BlockCounts before = pc_->evictable();
  EXPECT_EQ(before, (BlockCounts{10, 2}));
  const auto prompt = concat(t, seq_tokens(100, 30));
  const PrefixMatch m = pc_->match(prompt);
  EXPECT_EQ(m.newly_locked, (BlockCounts{10, 2}));
  start(SeqId(2), prompt, 3);
  // Full blocks stay locked; the window's sliding lock ended once the sequence moved past it.
  EXPECT_EQ(pc_->evictable().full, 0);
  EXPECT_EQ(pc_->evictable().sliding, 2);
  pc_->flush();
  pc_->check_integrity();
  EXPECT_EQ(pc_->stats().num_nodes, 10);  // the locked path survives a flush
  EXPECT_EQ(pc_->stats().held.sliding, 0);  // its window was not locked any more
  finish(SeqId(2), prompt);
  EXPECT_EQ(pc_->match(concat(prompt, {1})).num_tokens, 68);
  expect_all_free();
}

TEST_F(PrefixCacheTest, StaleWindowLockKeepsBlocksUntilReleased) {
  const auto t = seq_tokens(1, 40);
  run(SeqId(1), t);
  const auto prompt = concat(t, {3});
  const PrefixMatch m = pc_->match(prompt);
  kv_->add_sequence(SeqId(2));
  pc_->acquire(SeqId(2), m);
  pc_->check_integrity();
  EXPECT_EQ(pc_->evictable(), (BlockCounts{0, 0}));
  pc_->flush();  // breaks the endpoint; the locked window stays until the lock goes
  pc_->check_integrity();
  EXPECT_EQ(pc_->stats().held.sliding, 2);
  pc_->release(SeqId(2));
  kv_->free_sequence(SeqId(2));
  pc_->check_integrity();
  expect_all_free();
}

TEST_F(PrefixCacheTest, FullPressureTrimsTheSessionDueLastBackToItsPreviousEndpoint) {
  // Three sessions revisited round-robin (A, B, C, A, B, C): endpoints at 24 and 48 each.
  std::vector<std::vector<int32_t>> s;
  for (int i = 0; i < 3; ++i) {
    s.push_back(seq_tokens(1000 * (i + 1), 48));
    run(SeqId(10 + i), std::vector<int32_t>(s[i].begin(), s[i].begin() + 24));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run(SeqId(20 + i), s[i]), 24);
  EXPECT_EQ(pc_->stats().num_nodes, 36);
  // Two more free blocks: C, which just finished and comes back last, loses its second turn —
  // not A, the least recently used, which comes back next (LRU would give zero hits here).
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{2, 0});
  pc_->check_integrity();
  EXPECT_EQ(pc_->match(concat(s[0], {1})).num_tokens, 48);
  EXPECT_EQ(pc_->match(concat(s[1], {1})).num_tokens, 48);
  EXPECT_EQ(pc_->match(concat(s[2], {1})).num_tokens, 24);
  // A comes back and hits; afterwards it is the one expected back last.
  EXPECT_EQ(run(SeqId(30), concat(s[0], seq_tokens(5000, 8))), 48);
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{2, 0});
  pc_->check_integrity();
  EXPECT_EQ(pc_->match(concat(s[0], {1})).num_tokens, 48);
  EXPECT_EQ(pc_->match(concat(s[1], {1})).num_tokens, 48);
  expect_all_free();
}

TEST_F(PrefixCacheTest, SessionsThatStopComingBackAreEvictedFirst) {
  // A and B alternate for a while; C was used twice long ago and never again.
  const auto a = seq_tokens(1000, 200), b = seq_tokens(2000, 200), c = seq_tokens(3000, 48);
  run(SeqId(1), std::vector<int32_t>(c.begin(), c.begin() + 24));
  run(SeqId(2), c);
  for (int turn = 1; turn <= 6; ++turn) {
    run(SeqId(10 + turn), std::vector<int32_t>(a.begin(), a.begin() + 24 * turn));
    run(SeqId(20 + turn), std::vector<int32_t>(b.begin(), b.begin() + 24 * turn));
  }
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{2, 0});
  pc_->check_integrity();
  EXPECT_EQ(pc_->match(concat(c, {1})).num_tokens, 24);
  EXPECT_EQ(pc_->match(concat(std::vector<int32_t>(a.begin(), a.begin() + 144), {1})).num_tokens, 144);
  EXPECT_EQ(pc_->match(concat(std::vector<int32_t>(b.begin(), b.begin() + 144), {1})).num_tokens, 144);
  expect_all_free();
}

TEST_F(PrefixCacheTest, SlidingPressureBreaksInteriorWindowsBeforeSessionTails) {
  std::vector<std::vector<int32_t>> s;
  for (int i = 0; i < 3; ++i) {
    s.push_back(seq_tokens(1000 * (i + 1), 48));
    run(SeqId(10 + i), std::vector<int32_t>(s[i].begin(), s[i].begin() + 24));
    run(SeqId(20 + i), s[i]);
  }
  EXPECT_EQ(pc_->stats().num_endpoints, 6);
  const int64_t nodes = pc_->stats().num_nodes;
  // Ask for 6 more free sliding blocks: the three interior windows (24) go, tails stay.
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{0, 6});
  pc_->check_integrity();
  EXPECT_EQ(pc_->stats().num_nodes, nodes);
  EXPECT_EQ(pc_->stats().num_endpoints, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(pc_->match(concat(s[i], {1})).num_tokens, 48);
    std::vector<int32_t> early(s[i].begin(), s[i].begin() + 30);
    EXPECT_EQ(pc_->match(early).num_tokens, 0);
  }
  // More: the least recent tail goes, and with no window left its whole path is pruned.
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{0, 1});
  pc_->check_integrity();
  EXPECT_EQ(pc_->match(concat(s[0], {1})).num_tokens, 0);
  EXPECT_EQ(pc_->stats().num_nodes, nodes - 12);
  expect_all_free();
}

TEST_F(PrefixCacheTest, CheckpointsGiveHitsInsideALongPrefix) {
  make(256, 128, /*checkpoint=*/16);
  const auto t = seq_tokens(1, 64);
  const auto prompt = concat(t, {0});
  start(SeqId(1), prompt, /*chunk=*/7);
  // While it runs: checkpoints at 16, 32, 48 and 64 are cached and locked for the sequence, and
  // the sequence itself still holds only its live window.
  EXPECT_EQ(pc_->stats().num_endpoints, 4);
  EXPECT_LE(kv_->held_blocks(SeqId(1)).sliding, 3);
  EXPECT_TRUE(pc_->holds_lock(SeqId(1)));
  // Another request shares the long prompt before the first one finishes.
  EXPECT_EQ(pc_->match(concat(std::vector<int32_t>(t.begin(), t.begin() + 50), {5})).num_tokens, 48);
  finish(SeqId(1), prompt);
  EXPECT_EQ(pc_->stats().num_endpoints, 4);
  EXPECT_EQ(pc_->match(concat(std::vector<int32_t>(t.begin(), t.begin() + 40), {5})).num_tokens, 32);
  EXPECT_EQ(pc_->match(concat(std::vector<int32_t>(t.begin(), t.begin() + 20), {5})).num_tokens, 16);
  expect_all_free();
}

TEST_F(PrefixCacheTest, ForkedSequencesShareTheLock) {
  const auto t = seq_tokens(1, 40);
  run(SeqId(1), t);
  const auto prompt = concat(t, seq_tokens(70, 3));
  start(SeqId(2), prompt);
  std::vector<BlockCopy> copies;
  kv_->fork(SeqId(2), SeqId(3), &copies);
  pc_->fork(SeqId(2), SeqId(3), prompt);
  pc_->check_integrity();
  finish(SeqId(2), prompt);
  pc_->flush();
  pc_->check_integrity();
  EXPECT_EQ(pc_->stats().num_nodes, 10);  // still locked by the child
  finish(SeqId(3), prompt);
  expect_all_free();
}

TEST_F(PrefixCacheTest, StaleMatchIsRejected) {
  const auto t = seq_tokens(1, 40);
  run(SeqId(1), t);
  const PrefixMatch m = pc_->match(concat(t, {1}));
  pc_->flush();
  kv_->add_sequence(SeqId(2));
  EXPECT_DEATH(pc_->acquire(SeqId(2), m), "stale prefix match");
}

TEST_F(PrefixCacheTest, CreateValidatesTheCheckpointInterval) {
  Expected<PrefixCache> bad = PrefixCache::create(*kv_, PrefixCacheConfig{6});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("checkpoint_interval_tokens"), std::string::npos);
  EXPECT_TRUE(PrefixCache::create(*kv_, PrefixCacheConfig{8}).ok());
}

}  // namespace
}  // namespace beam
