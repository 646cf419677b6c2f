// PrefixCacheTest: match / insert / lock / evict / tombstone / heal semantics of the
// window-aware radix prefix cache, with check_integrity() after every operation.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <utility>
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

// The first n tokens of t, then tail.
std::vector<int32_t> head_then(const std::vector<int32_t>& t, int64_t n, const std::vector<int32_t>& tail) {
  return concat(std::vector<int32_t>(t.begin(), t.begin() + n), tail);
}

class PrefixCacheTest : public ::testing::Test {
 protected:
  void make(int32_t full, int32_t sliding, int64_t checkpoint = 0) {
    kv_ = std::make_unique<KvCacheManager>(
        KvCacheManager::create(KvCacheConfig{kB, kW, full, sliding}).value());
    pc_ = std::make_unique<PrefixCache>(*kv_, PrefixCacheConfig{checkpoint});
  }
  void SetUp() override { make(256, 128); }

  // Acquires the match of `tokens` under `salt` for a new sequence and computes the rest in
  // chunks, evicting as needed; returns the matched length. The sequence stays alive.
  int64_t start(SeqId id, const std::vector<int32_t>& tokens, int64_t chunk = 5,
                uint64_t salt = 0) {
    const PrefixMatch m = pc_->match(tokens, salt);
    kv_->add_sequence(id);
    pc_->set_salt(id, salt);
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
  int64_t run(SeqId id, const std::vector<int32_t>& tokens, int64_t chunk = 5, uint64_t salt = 0) {
    const int64_t hit = start(id, tokens, chunk, salt);
    finish(id, tokens);
    return hit;
  }
  // Sliding-pool pressure that takes exactly the loose windows (they go first).
  void drop_loose() {
    pc_->evict_until_free(kv_->free_blocks() + BlockCounts{0, pc_->stats().num_loose});
    pc_->check_integrity();
    EXPECT_EQ(pc_->stats().num_loose, 0);
  }
  int64_t hit(const std::vector<int32_t>& prefix, int64_t take, std::vector<int32_t> tail = {-7}) {
    std::vector<int32_t> p(prefix.begin(), prefix.begin() + take);
    p.insert(p.end(), tail.begin(), tail.end());
    return pc_->match(p).num_tokens;
  }
  // Restores `tokens` from the host tier, then runs sequence id on them: both find `expected`
  // tokens; every invariant of the cache and of the tier holds after.
  void expect_back_from_host(SeqId id, const std::vector<int32_t>& tokens, int64_t expected,
                             const HostKvTier& tier) {
    EXPECT_EQ(pc_->restore_from_host(tokens).num_tokens, expected);
    EXPECT_EQ(run(id, tokens), expected);
    tier.check_integrity();
    pc_->check_integrity();
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
  EXPECT_EQ(pc_->stats().num_endpoints, 1);      // at 40
  EXPECT_EQ(pc_->stats().held.sliding, 10);      // the pinned window before 40 + 8 loose blocks
  EXPECT_EQ(pc_->stats().num_loose, 8);
  EXPECT_EQ(pc_->match(concat(t, seq_tokens(500, 5))).num_tokens, 40);
  // The identical prompt: its last token is recomputed for logits, so the hit stops at 36.
  EXPECT_EQ(pc_->match(t).num_tokens, 36);
  EXPECT_EQ(pc_->match(concat(t, {7})).num_tokens, 40);
  EXPECT_EQ(pc_->match(seq_tokens(2, 40)).num_tokens, 0);  // another first block
  // Without the loose windows, 36 cannot be resumed: the window before it (block 7) is gone.
  drop_loose();
  EXPECT_EQ(pc_->match(t).num_tokens, 0);
  EXPECT_EQ(pc_->match(concat(t, {7})).num_tokens, 40);
  expect_all_free();
}

TEST_F(PrefixCacheTest, PartialBlocksAreNotCached) {
  const auto t = seq_tokens(1, 42);
  run(SeqId(1), t);
  EXPECT_EQ(pc_->stats().num_nodes, 10);  // 40 of 42 computed tokens are whole blocks
  EXPECT_EQ(pc_->match(concat(t, {9})).num_tokens, 40);
  expect_all_free();
}

TEST_F(PrefixCacheTest, ASharedPromptHitsWhereverItsLooseWindowsRemain) {
  // A long system prompt followed by different questions: the branch point lies inside the
  // first request's prompt, where only loose windows can give a hit.
  const auto system = seq_tokens(1, 64);
  run(SeqId(1), concat(system, seq_tokens(500, 30)));
  EXPECT_EQ(pc_->match(concat(system, seq_tokens(900, 30))).num_tokens, 64);
  // While the first request still runs, a second one already shares the prompt.
  start(SeqId(2), concat(system, seq_tokens(600, 30)));
  EXPECT_EQ(pc_->match(concat(system, seq_tokens(700, 30))).num_tokens, 64);
  finish(SeqId(2), concat(system, seq_tokens(600, 30)));
  expect_all_free();
}

TEST_F(PrefixCacheTest, LongPrefixWithoutWindowCutsBackToLastIntactWindow) {
  const auto t = seq_tokens(1, 100);
  run(SeqId(1), std::vector<int32_t>(t.begin(), t.begin() + 48));  // endpoint at 48
  EXPECT_EQ(run(SeqId(2), concat(t, {0})), 48);                    // endpoint at 100
  EXPECT_EQ(pc_->stats().num_endpoints, 2);
  EXPECT_EQ(hit(t, 80), 80);  // loose windows: any block boundary resumes
  drop_loose();
  // The path holds 80 tokens of this prompt but the windows after 48 are gone: cut back to 48.
  EXPECT_EQ(hit(t, 80), 48);
  EXPECT_EQ(hit(t, 40), 0);  // no intact window on the way
  EXPECT_EQ(hit(t, 100), 100);
  expect_all_free();
}

TEST_F(PrefixCacheTest, RecomputingHealsTombstones) {
  const auto t = seq_tokens(1, 100);
  run(SeqId(1), std::vector<int32_t>(t.begin(), t.begin() + 48));
  run(SeqId(2), concat(t, {0}));
  drop_loose();
  const std::vector<int32_t> p81(t.begin(), t.begin() + 81);
  EXPECT_EQ(hit(p81, 81), 48);
  // A sequence recomputes 48..81 along the existing nodes: its windows revive the tombstones.
  EXPECT_EQ(run(SeqId(3), p81), 48);
  EXPECT_EQ(hit(p81, 81), 80);
  EXPECT_EQ(hit(t, 72), 72);
  EXPECT_EQ(pc_->stats().num_nodes, 25);  // no duplicate nodes
  expect_all_free();
}

TEST_F(PrefixCacheTest, LocksProtectInFlightPrefixesAndOnlyTheWindowIsSlidingLocked) {
  const auto t = seq_tokens(1, 40);
  run(SeqId(1), t);
  EXPECT_EQ(pc_->evictable(), (BlockCounts{10, 10}));
  const auto prompt = concat(t, seq_tokens(100, 30));
  const PrefixMatch m = pc_->match(prompt);
  EXPECT_EQ(m.num_tokens, 40);
  EXPECT_EQ(m.newly_locked, (BlockCounts{10, 2}));  // the whole prefix, its window only
  start(SeqId(2), prompt, 3);
  // The running sequence's path (cached as it went) is locked; of its sliding blocks only its
  // live window is: everything behind it is loose and evictable.
  EXPECT_EQ(pc_->evictable().full, 0);
  const int64_t live = kv_->held_blocks(SeqId(2)).sliding;
  EXPECT_EQ(pc_->stats().held.sliding - pc_->evictable().sliding, live - 1);  // partial block not cached
  pc_->flush();
  pc_->check_integrity();
  EXPECT_EQ(pc_->stats().num_nodes, 17);  // the locked path survives a flush
  EXPECT_EQ(pc_->evictable().sliding, 0);
  finish(SeqId(2), prompt);
  EXPECT_EQ(pc_->match(concat(prompt, {1})).num_tokens, 68);
  expect_all_free();
}

TEST_F(PrefixCacheTest, BrokenLockedWindowStaysUntilReleased) {
  const auto t = seq_tokens(1, 40);
  run(SeqId(1), t);
  const PrefixMatch m = pc_->match(concat(t, {3}));
  kv_->add_sequence(SeqId(2));
  pc_->acquire(SeqId(2), m);
  pc_->check_integrity();
  EXPECT_EQ(pc_->evictable(), (BlockCounts{0, 8}));  // loose blocks behind the window
  pc_->flush();  // breaks the endpoint; the locked window stays until the lock goes
  pc_->check_integrity();
  EXPECT_EQ(pc_->stats().held.sliding, 2);
  EXPECT_EQ(pc_->stats().num_endpoints, 0);
  pc_->release(SeqId(2));
  kv_->free_sequence(SeqId(2));
  pc_->check_integrity();
  EXPECT_EQ(pc_->stats().num_endpoints, 1);  // its window is still whole: resumable again
  expect_all_free();
}

TEST_F(PrefixCacheTest, FullPressureTrimsTheSessionDueLast) {
  std::vector<std::vector<int32_t>> s;
  for (int i = 0; i < 3; ++i) {
    s.push_back(seq_tokens(1000 * (i + 1), 48));
    run(SeqId(10 + i), std::vector<int32_t>(s[i].begin(), s[i].begin() + 24));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run(SeqId(20 + i), s[i]), 24);
  EXPECT_EQ(pc_->stats().num_nodes, 36);
  // Two more free blocks: C, which just finished and comes back last, loses two blocks (its
  // loose windows make every block boundary resumable) — not A, the least recently used, which
  // comes back next (LRU would give zero hits here).
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{2, 0});
  pc_->check_integrity();
  EXPECT_EQ(hit(s[0], 48), 48);
  EXPECT_EQ(hit(s[1], 48), 48);
  EXPECT_EQ(hit(s[2], 48), 40);
  // Without loose windows a trim goes back to the previous endpoint: C's first turn.
  drop_loose();
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{1, 0});
  pc_->check_integrity();
  EXPECT_EQ(hit(s[2], 48), 24);
  // A comes back and hits; afterwards it is the one expected back last.
  EXPECT_EQ(run(SeqId(30), concat(s[0], seq_tokens(5000, 8))), 48);
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{2, 0});
  pc_->check_integrity();
  EXPECT_EQ(hit(s[0], 48), 48);
  EXPECT_EQ(hit(s[1], 48), 48);
  EXPECT_EQ(hit(s[2], 48), 24);
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
  EXPECT_EQ(hit(c, 48), 40);
  EXPECT_EQ(hit(a, 144), 144);
  EXPECT_EQ(hit(b, 144), 144);
  expect_all_free();
}

TEST_F(PrefixCacheTest, SlidingPressureTakesLooseWindowsThenInteriorWindowsThenTails) {
  std::vector<std::vector<int32_t>> s;
  for (int i = 0; i < 3; ++i) {
    s.push_back(seq_tokens(1000 * (i + 1), 48));
    run(SeqId(10 + i), std::vector<int32_t>(s[i].begin(), s[i].begin() + 24));
    run(SeqId(20 + i), s[i]);
  }
  EXPECT_EQ(pc_->stats().num_endpoints, 6);
  EXPECT_EQ(pc_->stats().num_loose, 24);  // 12 blocks per session, 4 of them pinned
  const int64_t nodes = pc_->stats().num_nodes;
  // Loose windows first, then the three interior windows (at 24); session tails stay.
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{0, 24 + 6});
  pc_->check_integrity();
  EXPECT_EQ(pc_->stats().num_nodes, nodes);
  EXPECT_EQ(pc_->stats().num_endpoints, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(hit(s[i], 48), 48);
    EXPECT_EQ(hit(s[i], 30), 0);
  }
  // One more: a tail goes, and with no window left on its path the session is pruned whole.
  pc_->evict_until_free(kv_->free_blocks() + BlockCounts{0, 1});
  pc_->check_integrity();
  EXPECT_EQ(pc_->stats().num_nodes, nodes - 12);
  int sessions_left = 0;
  for (int i = 0; i < 3; ++i) sessions_left += hit(s[i], 48) == 48;
  EXPECT_EQ(sessions_left, 2);
  expect_all_free();
}

TEST_F(PrefixCacheTest, CheckpointsGiveHitsInsideALongPrefix) {
  make(256, 128, /*checkpoint=*/16);
  const auto t = seq_tokens(1, 64);
  const auto prompt = concat(t, {0});
  start(SeqId(1), prompt, /*chunk=*/7);
  // While it runs: checkpoints at 16, 32, 48 and 64 are pinned, and the sequence itself
  // still holds only its live window.
  EXPECT_EQ(pc_->stats().num_endpoints, 4);
  EXPECT_LE(kv_->held_blocks(SeqId(1)).sliding, 3);
  EXPECT_TRUE(pc_->holds_lock(SeqId(1)));
  // Another request shares the long prompt before the first one finishes.
  EXPECT_EQ(hit(t, 50), 48);
  finish(SeqId(1), prompt);
  EXPECT_EQ(pc_->stats().num_endpoints, 4);
  EXPECT_EQ(hit(t, 40), 40);  // loose windows
  drop_loose();
  EXPECT_EQ(hit(t, 40), 32);  // checkpoints survive them
  EXPECT_EQ(hit(t, 20), 16);
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

TEST_F(PrefixCacheTest, SaltsKeepPrefixesApart) {
  const uint64_t a = PrefixCache::salt_of_text("tenant-a"), b = PrefixCache::salt_of_text("b");
  EXPECT_EQ(PrefixCache::salt_of_text(""), 0u);
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  const auto t = seq_tokens(1, 40);
  const auto probe = concat(t, {-7});
  EXPECT_EQ(run(SeqId(1), t, 5, a), 0);
  EXPECT_EQ(pc_->match(probe, a).num_tokens, 40);
  EXPECT_EQ(pc_->match(probe).num_tokens, 0);  // unsalted requests do not see it
  EXPECT_EQ(pc_->match(probe, b).num_tokens, 0);
  // The same tokens unsalted: a second tree beside the first; each salt still sees its own.
  EXPECT_EQ(run(SeqId(2), t, 5), 0);
  EXPECT_EQ(pc_->stats().num_nodes, 20);
  EXPECT_EQ(pc_->match(probe).num_tokens, 40);
  EXPECT_EQ(run(SeqId(3), t, 5, a), 36);  // the last token is always recomputed
  // A running sequence caches under its salt as it goes; its fork children inherit the salt.
  const auto prompt = concat(t, seq_tokens(70, 3));
  EXPECT_EQ(start(SeqId(4), prompt, 5, b), 0);
  EXPECT_EQ(pc_->match(probe, b).num_tokens, 40);
  std::vector<BlockCopy> copies;
  kv_->fork(SeqId(4), SeqId(5), &copies);
  pc_->fork(SeqId(4), SeqId(5), prompt);
  pc_->check_integrity();
  finish(SeqId(4), prompt);
  const auto longer = concat(prompt, seq_tokens(90, 9));
  kv_->reserve(SeqId(5), static_cast<int64_t>(longer.size()));
  complete_work(SeqWork{SeqId(5), longer, WorkKind::kPrefill, 43, 9, false}, 9, *kv_, pc_.get());
  finish(SeqId(5), longer);
  EXPECT_EQ(pc_->match(concat(longer, {-7}), b).num_tokens, 52);
  EXPECT_EQ(pc_->match(concat(longer, {-7})).num_tokens, 40);
  expect_all_free();
}

// A token limit (deterministic GPU inference: the prompt, whose KV holds the prefill kernel's
// bits) caps what a sequence caches, as it runs and when it finishes, and its fork children
// inherit it: 20 prompt tokens of 40 computed give 5 nodes, and a request holding the generated
// tokens too reuses the prompt only.
TEST_F(PrefixCacheTest, TokenLimitsCacheOnlyThePrompt) {
  const auto prompt = seq_tokens(1, 20);
  const auto all = concat(prompt, seq_tokens(60, 20));
  kv_->add_sequence(SeqId(1));
  pc_->set_token_limit(SeqId(1), 20);
  for (int64_t c = 0; c < 40; c += 5) {
    pc_->evict_until_free(kv_->blocks_needed(SeqId(1), c + 5));
    kv_->reserve(SeqId(1), c + 5);
    complete_work(SeqWork{SeqId(1), all, WorkKind::kDecode, c, 5, false}, 5, *kv_, pc_.get());
    pc_->check_integrity();
  }
  EXPECT_EQ(pc_->stats().num_nodes, 5);
  std::vector<BlockCopy> copies;
  kv_->fork(SeqId(1), SeqId(2), &copies);
  pc_->fork(SeqId(1), SeqId(2), all);
  pc_->check_integrity();
  finish(SeqId(1), all);
  EXPECT_EQ(pc_->stats().num_nodes, 5);
  const auto longer = concat(all, seq_tokens(90, 8));
  kv_->reserve(SeqId(2), static_cast<int64_t>(longer.size()));
  complete_work(SeqWork{SeqId(2), longer, WorkKind::kDecode, 40, 8, false}, 8, *kv_, pc_.get());
  finish(SeqId(2), longer);
  EXPECT_EQ(pc_->stats().num_nodes, 5);  // the child's limit is its parent's
  EXPECT_EQ(pc_->match(concat(longer, {-7})).num_tokens, 20);
  // Without a limit the same run caches every whole block.
  EXPECT_EQ(run(SeqId(3), all), 20);
  EXPECT_EQ(pc_->stats().num_nodes, 10);
  EXPECT_EQ(pc_->match(concat(all, {-7})).num_tokens, 40);
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

// A host tier (HostKvTier with a mover that counts its copies): evicting a finished sequence's
// prefix saves its blocks; match() then finds nothing, match_with_host() and plan_host_restore()
// the whole prefix, and restore_from_host() brings it back under the same salt only.
class CountingMover final : public HostBlockMover {
 public:
  void save(AttentionKind pool, BlockId, int32_t) override { saved.of(pool)++; }
  void load(AttentionKind pool, int32_t, BlockId) override { loaded.of(pool)++; }
  BlockCounts saved, loaded;
};

TEST_F(PrefixCacheTest, EvictedBlocksComeBackFromTheHostTier) {
  CountingMover mover;
  HostKvTier tier(kB, BlockCounts{64, 64}, mover);
  pc_->attach_host_tier(&tier);
  const std::vector<int32_t> t = seq_tokens(100, 26);  // 6 whole blocks, 2 tokens more
  run(SeqId(1), t, 5, /*salt=*/9);
  const std::vector<int32_t> again = concat(std::vector<int32_t>(t.begin(), t.begin() + 24), {-5});
  ASSERT_EQ(pc_->match(again, 9).num_tokens, 24);
  EXPECT_EQ(pc_->plan_host_restore(again, 9).num_tokens, 0);  // the device has it all
  pc_->evict_until_free(kv_->total_blocks());  // everything out, to the host
  pc_->check_integrity();
  EXPECT_EQ(mover.saved.full, 6);
  EXPECT_GE(mover.saved.sliding, 2);
  EXPECT_EQ(pc_->match(again, 9).num_tokens, 0);
  EXPECT_EQ(pc_->match_with_host(again, 9), 24);
  EXPECT_EQ(pc_->match_with_host(again, 0), 0);  // another salt: nothing
  const HostRestore plan = pc_->plan_host_restore(again, 9);
  EXPECT_EQ(plan.num_tokens, 24);
  EXPECT_EQ(plan.blocks, (BlockCounts{6, 2}));  // every full block, the window's sliding ones
  EXPECT_EQ(pc_->restore_from_host(again, 0).num_tokens, 0);
  EXPECT_EQ(pc_->restore_from_host(again, 9).num_tokens, 24);
  pc_->check_integrity();
  EXPECT_EQ(mover.loaded, (BlockCounts{6, 2}));
  EXPECT_EQ(pc_->stats().host_restores_unused, 0);
  EXPECT_EQ(pc_->match(again, 9).num_tokens, 24);
  // Evicted again before any sequence used it: six full blocks loaded for nothing.
  pc_->evict_until_free(kv_->total_blocks());
  EXPECT_EQ(pc_->stats().host_restores_unused, 6);
  ASSERT_EQ(pc_->restore_from_host(again, 9).num_tokens, 24);
  EXPECT_EQ(run(SeqId(2), again, 5, 9), 24);  // admitted on the restored prefix
  pc_->evict_until_free(kv_->total_blocks());
  EXPECT_EQ(pc_->stats().host_restores_unused, 6);  // used this time: not counted
  pc_->flush();  // empties the host tier too
  EXPECT_TRUE(tier.empty());
  EXPECT_EQ(pc_->match_with_host(again, 9), 0);
  pc_->check_integrity();
}

// A mover that records which blocks went to the host (save order kept).
class RecordingSaves final : public HostBlockMover {
 public:
  void save(AttentionKind pool, BlockId block, int32_t) override { saves.push_back({pool, block.value}); }
  void load(AttentionKind pool, int32_t, BlockId) override { loaded.of(pool)++; }
  std::vector<std::pair<AttentionKind, int32_t>> saves;
  BlockCounts loaded;
  int64_t count(AttentionKind pool) const {
    return std::count_if(saves.begin(), saves.end(), [&](const auto& s) { return s.first == pool; });
  }
};

TEST_F(PrefixCacheTest, WriteThroughCopiesBlocksAsTheyAreCachedAndEvictionAddsOnlyWhatIsMissing) {
  RecordingSaves mover;
  HostKvTier tier(kB, BlockCounts{64, 64}, mover);
  pc_->attach_host_tier(&tier, HostWritePolicy::kWriteThrough);
  const std::vector<int32_t> t = seq_tokens(100, 26);  // 6 whole blocks
  start(SeqId(1), t);
  EXPECT_EQ(mover.count(AttentionKind::kFull), 6);     // each full block as it was cached
  EXPECT_EQ(mover.count(AttentionKind::kSliding), 0);  // no endpoint window pinned yet
  finish(SeqId(1), t);
  EXPECT_EQ(mover.count(AttentionKind::kSliding), 2);  // the tail's window, pinned at insert
  const std::vector<int32_t> again = head_then(t, 24, {-5});
  EXPECT_EQ(pc_->match_with_host(again), 24);
  const int64_t held_sliding = pc_->stats().held.sliding;
  ASSERT_GT(held_sliding, 2);  // loose windows besides the tail's
  pc_->evict_until_free(kv_->total_blocks());
  pc_->check_integrity();
  EXPECT_EQ(mover.count(AttentionKind::kFull), 6);  // the host had them all: no second copy
  // Eviction copied only the sliding blocks the host lacked: the loose ones.
  EXPECT_EQ(mover.count(AttentionKind::kSliding), held_sliding);
  expect_back_from_host(SeqId(2), again, 24, tier);
}

// Write-through into a host tier that holds one session: the next session's copies (its blocks
// still on the device) never push out the blocks the first one lost, so it still comes back.
TEST_F(PrefixCacheTest, WriteThroughCopiesNeverPushOutEvictedBlocks) {
  RecordingSaves mover;
  HostKvTier tier(kB, BlockCounts{6, 64}, mover);
  pc_->attach_host_tier(&tier, HostWritePolicy::kWriteThrough);
  const std::vector<int32_t> a = seq_tokens(100, 26), b = seq_tokens(500, 26);
  run(SeqId(1), a);
  pc_->evict_until_free(kv_->total_blocks());  // a's six blocks now live on the host only
  run(SeqId(2), b);  // b's six copies find the host full of a's evicted blocks: skipped
  const std::vector<int32_t> again = head_then(a, 24, {-5});
  EXPECT_EQ(pc_->match_with_host(again), 24);
  expect_back_from_host(SeqId(3), again, 24, tier);
}

TEST_F(PrefixCacheTest, WriteThroughSelectiveKeepsOnlyPrefixesASecondSequenceUsed) {
  RecordingSaves mover;
  HostKvTier tier(kB, BlockCounts{64, 64}, mover);
  pc_->attach_host_tier(&tier, HostWritePolicy::kWriteThroughSelective);
  const std::vector<int32_t> once = seq_tokens(500, 26);
  run(SeqId(1), once);
  EXPECT_TRUE(mover.saves.empty());  // one use: nothing yet
  const std::vector<int32_t> shared = seq_tokens(100, 26);
  run(SeqId(2), shared);
  EXPECT_TRUE(mover.saves.empty());
  // A second prompt on the first 24 tokens of `shared`: its matched blocks reach two uses.
  const std::vector<int32_t> second = head_then(shared, 24, {-5, -6});
  EXPECT_EQ(run(SeqId(3), second), 24);
  EXPECT_EQ(mover.count(AttentionKind::kFull), 6);     // the six blocks it matched
  EXPECT_EQ(mover.count(AttentionKind::kSliding), 2);  // and the window before them
  pc_->evict_until_free(kv_->total_blocks());  // the single-use blocks are dropped, not saved
  pc_->check_integrity();
  EXPECT_EQ(mover.count(AttentionKind::kFull), 6);
  EXPECT_EQ(pc_->match_with_host(head_then(once, 24, {-5})), 0);
  const std::vector<int32_t> third = head_then(shared, 24, {-9});
  EXPECT_EQ(pc_->match_with_host(third), 24);
  expect_back_from_host(SeqId(4), third, 24, tier);
}

TEST_F(PrefixCacheTest, LooseWindowsNeverPushAnEndpointWindowOutOfTheHost) {
  RecordingSaves mover;
  HostKvTier tier(kB, BlockCounts{64, 2}, mover);  // room for one window of sliding blocks
  pc_->attach_host_tier(&tier);
  const std::vector<int32_t> t = seq_tokens(100, 42);  // 10 whole blocks: loose windows behind
  run(SeqId(1), t);
  ASSERT_GT(pc_->stats().num_loose, 0);
  // Eviction trims the session block by block: the tail's window goes first, then each fallback
  // point's window up the path, which would take the least recently used slots if ranks did not
  // keep them out (the host would then resume at 8 tokens).
  pc_->evict_until_free(kv_->total_blocks());
  pc_->check_integrity();
  EXPECT_GT(mover.count(AttentionKind::kSliding), 0);
  const std::vector<int32_t> again = head_then(t, 40, {-5});
  EXPECT_EQ(pc_->match_with_host(again), 40);
  expect_back_from_host(SeqId(2), again, 40, tier);
}

}  // namespace
}  // namespace beam
