// SchedulerTest: step plans (budget, decode first, chunked prefill, admission by both pools,
// preemption choice, resume via the prefix cache, forks, cancel, rejection), driven through the
// model-free SimEngine so every plan is also committed and checked.
#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <vector>

#include "sim_engine.h"

namespace beam {
namespace {

using testing::SimEngine;
using testing::SimRequest;

std::vector<int32_t> prompt(int32_t start, int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

KvCacheConfig kv_config(int32_t full, int32_t sliding) { return KvCacheConfig{4, 8, full, sliding}; }

SchedulerConfig sched_config(int64_t budget, int64_t max_running = 16) {
  SchedulerConfig c;
  c.max_step_tokens = budget;
  c.max_running_seqs = max_running;
  c.max_prefill_chunk_tokens = budget;
  return c;
}

void expect_drained(SimEngine& e) {
  ASSERT_TRUE(e.idle());
  if (e.prefix()) e.prefix()->flush();
  e.check();
  EXPECT_EQ(e.kv().free_blocks(), e.kv().total_blocks());
}

TEST(SchedulerTest, DecodesComeFirstAndTheBudgetIsRespected) {
  SimEngine e(kv_config(256, 128), sched_config(16), true);
  for (int i = 0; i < 3; ++i) e.submit(prompt(100 * i, 5), 20);
  e.step();  // three prompts of 5 fit one step (15 tokens)
  const SeqId big = e.submit(prompt(1000, 50), 4);
  const StepPlan p = e.step();
  ASSERT_EQ(p.work.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.work[i].kind, WorkKind::kDecode);
    EXPECT_EQ(p.work[i].num_tokens, 1);
    EXPECT_TRUE(p.work[i].samples);
  }
  EXPECT_EQ(p.work[3].seq, big);
  EXPECT_EQ(p.work[3].num_tokens, 13);  // what the decodes left of the budget
  EXPECT_FALSE(p.work[3].samples);
  EXPECT_EQ(p.num_tokens(), 16);
  e.run_until_idle(1000);
  expect_drained(e);
}

TEST(SchedulerTest, ChunkedPrefillSamplesOnlyAfterTheLastChunk) {
  SchedulerConfig c = sched_config(64);
  c.max_prefill_chunk_tokens = 16;
  SimEngine e(kv_config(256, 128), c, true);
  const SeqId s = e.submit(prompt(1, 50), 2);
  std::vector<int64_t> chunks;
  for (int i = 0; i < 4; ++i) {
    const StepPlan p = e.step();
    ASSERT_EQ(p.work.size(), 1u);
    chunks.push_back(p.work[0].num_tokens);
    EXPECT_EQ(p.work[0].samples, i == 3);
    EXPECT_EQ(p.work[0].num_computed, 16 * i);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{16, 16, 16, 2}));
  EXPECT_EQ(e.request(s).generated(), 1);
  // Sliding memory stays bounded by window + chunk during the prefill.
  EXPECT_LE(e.max_sliding_held_per_seq(), blocks_for_tokens(7, 4) + 2 + 4);
  e.run_until_idle(100);
  expect_drained(e);
}

TEST(SchedulerTest, LongGenerationsKeepSlidingMemoryBounded) {
  // Window 8, block 4: decoding 20x the window through the whole loop.
  SimEngine e(kv_config(256, 64), sched_config(64), true);
  for (int i = 0; i < 3; ++i) e.submit(prompt(1000 * i, 13), 160);
  int64_t max_held_by_seqs = 0;
  while (!e.idle()) {
    e.step();
    const int64_t held = e.kv().used_blocks().sliding - e.prefix()->evictable().sliding;
    max_held_by_seqs = std::max(max_held_by_seqs, held);
  }
  // Per sequence: ceil(7/4) + 2 blocks (+ the prompt chunk once), never ~170/4.
  EXPECT_LE(e.max_sliding_held_per_seq(), blocks_for_tokens(7, 4) + 2 + blocks_for_tokens(13, 4));
  EXPECT_LE(max_held_by_seqs, 3 * (blocks_for_tokens(7, 4) + 2 + blocks_for_tokens(13, 4)));
  expect_drained(e);
}

TEST(SchedulerTest, AdmissionCutsTheFirstChunkToTheSlidingPool) {
  // Plenty of full blocks; the sliding pool holds a's whole first chunk (10 blocks) plus 2.
  SchedulerConfig c = sched_config(64);
  c.admission_headroom_blocks_per_seq = 0;
  SimEngine e(kv_config(512, 12), c, true);
  const SeqId a = e.submit(prompt(1, 40), 30);
  const SeqId b = e.submit(prompt(1000, 40), 30);
  const StepPlan p = e.step();
  ASSERT_EQ(p.admitted.size(), 2u);
  ASSERT_EQ(p.work.size(), 2u);
  EXPECT_EQ(p.work[0].seq, a);
  EXPECT_EQ(p.work[0].num_tokens, 40);
  EXPECT_EQ(p.work[1].seq, b);
  EXPECT_EQ(p.work[1].num_tokens, 8);  // two sliding blocks were left
  e.run_until_idle(1000);
  expect_drained(e);
}

TEST(SchedulerTest, AdmissionWaitsWhenTheSlidingPoolIsFull) {
  SchedulerConfig c = sched_config(64);
  c.admission_headroom_blocks_per_seq = 0;
  SimEngine e(kv_config(512, 10), c, true);
  const SeqId a = e.submit(prompt(1, 40), 30);
  const SeqId b = e.submit(prompt(1000, 40), 30);
  const StepPlan p = e.step();
  ASSERT_EQ(p.admitted.size(), 1u);
  EXPECT_EQ(p.admitted[0].seq, a);
  EXPECT_EQ(e.waiting(), std::vector<SeqId>{b});
  // Once a's prompt is done its window shrinks to 3 blocks and b gets in.
  e.step();
  EXPECT_TRUE(e.request(b).running);
  e.run_until_idle(1000);
  expect_drained(e);
}

TEST(SchedulerTest, AdmissionWaitsForTheFullPoolAndHeadOfLineBlocks) {
  SchedulerConfig c = sched_config(256);
  SimEngine e(kv_config(40, 64), c, true);
  e.submit(prompt(1, 100), 10);                   // 25 blocks + decode growth
  const SeqId big = e.submit(prompt(1000, 60), 10);  // 15 blocks: does not fit next to it
  const SeqId small = e.submit(prompt(2000, 4), 2);  // would fit, but waits its turn
  const StepPlan p = e.step();
  EXPECT_EQ(p.admitted.size(), 1u);
  EXPECT_FALSE(e.request(big).running);
  EXPECT_FALSE(e.request(small).running);
  e.run_until_idle(1000);
  EXPECT_TRUE(e.request(big).done && e.request(small).done);
  expect_drained(e);
}

TEST(SchedulerTest, PreemptsLowestPriorityNewestAndResumesFromThePrefixCache) {
  SchedulerConfig c = sched_config(256);
  c.admission_headroom_blocks_per_seq = 0;
  // Checkpoints every 8 tokens: eviction trims a preempted sequence's cached blocks back a
  // checkpoint at a time instead of dropping everything after its last window.
  SimEngine e(kv_config(30, 64), c, true, /*checkpoint_interval_tokens=*/8);
  const SeqId hi = e.submit(prompt(1, 20), 30, /*priority=*/1);
  const SeqId old = e.submit(prompt(500, 20), 30);
  const SeqId young = e.submit(prompt(900, 20), 30);
  e.step();  // all three admitted: 15 of 30 blocks
  SeqId first_victim;
  for (int i = 0; i < 200 && !first_victim.valid(); ++i) {
    const StepPlan p = e.step();
    if (!p.preempted.empty()) first_victim = p.preempted[0].seq;
  }
  EXPECT_EQ(first_victim, young);
  e.run_until_idle(2000);
  for (SeqId s : {hi, old, young}) EXPECT_EQ(e.request(s).generated(), 30);
  EXPECT_GT(e.request(young).num_preemptions, 0);
  EXPECT_EQ(e.request(hi).num_preemptions, 0);
  // The resume re-hit blocks it had computed before being preempted.
  EXPECT_GT(e.request(young).last_cached_tokens, 0);
  expect_drained(e);
}

TEST(SchedulerTest, PromptsThatCanNeverFitAreRejected) {
  SimEngine e(kv_config(8, 16), sched_config(64), true);
  const SeqId too_big = e.submit(prompt(1, 40), 4);
  const SeqId ok = e.submit(prompt(100, 10), 4);
  const StepPlan p = e.step();
  EXPECT_EQ(p.rejected, std::vector<SeqId>{too_big});
  EXPECT_TRUE(e.request(too_big).rejected);
  EXPECT_TRUE(e.request(ok).running);
  e.run_until_idle(100);
  expect_drained(e);
}

TEST(SchedulerTest, ForkedSamplesShareThePromptAndCopyItsPartialBlock) {
  SimEngine e(kv_config(128, 64), sched_config(64), true);
  const SeqId parent = e.submit(prompt(1, 30), 10, 0, /*num_forks=*/2);
  e.step();  // prefill, first token of the parent
  const StepPlan p = e.step();
  ASSERT_EQ(p.forks.size(), 2u);
  EXPECT_EQ(p.forks[0].parent, parent);
  EXPECT_EQ(p.new_blocks.full, 2 + 0);  // one partial-block copy per child; 31 slots fit 8 blocks
  const SeqId child = p.forks[0].child;
  // The first 7 full blocks are shared by the three samples and cached (locked) in the tree.
  EXPECT_EQ(e.kv().full_table(child)[0], e.kv().full_table(parent)[0]);
  EXPECT_EQ(e.kv().block_ref_count(AttentionKind::kFull, BlockId(e.kv().full_table(parent)[0])), 4);
  EXPECT_TRUE(e.prefix()->holds_lock(child));
  EXPECT_NE(e.kv().full_table(child)[7], e.kv().full_table(parent)[7]);
  e.run_until_idle(100);
  EXPECT_EQ(e.request(child).generated(), 10);
  EXPECT_NE(e.request(child).tokens.back(), e.request(parent).tokens.back());
  expect_drained(e);
}

TEST(SchedulerTest, CancelReleasesEverythingWherever) {
  SchedulerConfig c = sched_config(8);
  SimEngine e(kv_config(64, 64), c, true);
  const SeqId base = e.submit(prompt(1, 20), 2);
  e.run_until_idle(100);
  const SeqId prefilling = e.submit(prompt(1, 40), 10);  // hits base's prefix, then chunks
  const SeqId decoding = e.submit(prompt(500, 6), 50);
  const SeqId waiting = e.submit(prompt(900, 6), 5);
  e.step();
  e.step();
  e.cancel(waiting);
  e.cancel(prefilling);
  EXPECT_FALSE(e.prefix()->holds_lock(prefilling));
  for (int i = 0; i < 5; ++i) e.step();
  e.cancel(decoding);
  e.cancel(decoding);  // idempotent
  EXPECT_TRUE(e.idle());
  EXPECT_TRUE(e.request(base).done);
  expect_drained(e);
}

// A decoding sequence's view with `drafts` draft tokens after its known ones.
SeqState with_drafts(SeqId id, const SimRequest& r, int64_t drafts, std::vector<int32_t>& storage) {
  storage = r.tokens;
  for (int64_t i = 0; i < drafts; ++i) storage.push_back(7000 + static_cast<int32_t>(i));
  SeqState v{id, 0, 0, storage, SeqId()};
  v.num_draft_tokens = drafts;
  return v;
}

TEST(SchedulerTest, PlanIsPureAndSpeculativeDecodesReserveTheirWidth) {
  SimEngine e(kv_config(64, 64), sched_config(64), true);
  e.submit(prompt(1, 10), 5);
  e.step();
  // Plan twice on the same state: same plan, no state change.
  const SeqId id = e.running()[0];
  std::vector<int32_t> tokens;
  std::vector<SeqState> running{with_drafts(id, e.request(id), 3, tokens)};
  const SchedulerInput in{running, {}, &e.kv(), e.prefix()};
  const BlockCounts free_before = e.kv().free_blocks();
  const StepPlan p1 = e.scheduler().plan(in);
  const StepPlan p2 = e.scheduler().plan(in);
  EXPECT_EQ(e.kv().free_blocks(), free_before);
  ASSERT_EQ(p1.work.size(), 1u);
  EXPECT_EQ(p1.work[0].kind, WorkKind::kDecode);
  EXPECT_EQ(p1.work[0].num_computed, 10);
  EXPECT_EQ(p1.work[0].num_tokens, 4);  // the last token + 3 drafts
  EXPECT_TRUE(p1.work[0].samples);
  EXPECT_EQ(p1.work[0].num_tokens, p2.work[0].num_tokens);
  EXPECT_EQ(p1.new_blocks, p2.new_blocks);
  EXPECT_EQ(p1.new_blocks, (BlockCounts{1, 1}));  // slots 10..13 need a fourth block
}

// Drafts are optional: the token budget cuts them, and a pool without room for them drops them
// rather than preempting anyone; a decode whose drafts were all cut still runs.
TEST(SchedulerTest, DraftsGiveWayToTheBudgetAndThePools) {
  SimEngine e(kv_config(64, 64), sched_config(64), true);
  const SeqId a = e.submit(prompt(1, 12), 20);
  const SeqId b = e.submit(prompt(100, 12), 20);
  e.step();
  std::vector<int32_t> ta, tb;
  std::vector<SeqState> running{with_drafts(a, e.request(a), 5, ta),
                                with_drafts(b, e.request(b), 5, tb)};
  running[1].arrival = 1;
  {
    const Scheduler tight(sched_config(8));  // 6 for a, 2 for b
    const StepPlan p = tight.plan(SchedulerInput{running, {}, &e.kv(), e.prefix()});
    ASSERT_EQ(p.work.size(), 2u);
    EXPECT_EQ(p.work[0].num_tokens, 6);
    EXPECT_EQ(p.work[1].num_tokens, 2);
    EXPECT_TRUE(p.preempted.empty());
  }
  {
    const Scheduler one(sched_config(6));  // a takes it all; b waits (never prefilled)
    const StepPlan p = one.plan(SchedulerInput{running, {}, &e.kv(), e.prefix()});
    ASSERT_EQ(p.work.size(), 1u);
    EXPECT_EQ(p.work[0].seq, a);
    EXPECT_TRUE(p.preempted.empty());
  }
  // A full pool with one free block: slot 12 needs it, drafts past slot 15 would need a second.
  SchedulerConfig no_headroom = sched_config(64);
  no_headroom.admission_headroom_blocks_per_seq = 0;
  SimEngine f(kv_config(4, 16), no_headroom, false);
  const SeqId c = f.submit(prompt(1, 12), 20);
  f.step();
  ASSERT_EQ(f.kv().free_blocks().full, 1);
  std::vector<int32_t> tc;
  for (const auto& [drafts, width] : {std::pair<int64_t, int64_t>{3, 4}, {5, 1}}) {
    const std::vector<SeqState> view{with_drafts(c, f.request(c), drafts, tc)};
    const StepPlan p = f.scheduler().plan(SchedulerInput{view, {}, &f.kv(), nullptr});
    ASSERT_EQ(p.work.size(), 1u);
    EXPECT_EQ(p.work[0].num_tokens, width) << drafts << " drafts";
    EXPECT_TRUE(p.preempted.empty());
  }
}

// Prompt-logprobs prefills share SchedulerConfig::max_logit_tokens_per_step; a request behind
// one that found the cap spent waits (head of line); decodes and plain prefills are not capped.
TEST(SchedulerTest, LogitsEveryTokenPrefillsShareTheirStepCap) {
  SchedulerConfig c = sched_config(64);
  c.max_logit_tokens_per_step = 10;
  SimEngine e(kv_config(256, 128), c, true);
  const SeqId plain = e.submit(prompt(500, 20), 3);
  e.step();
  const SeqId a = e.submit(prompt(1, 30), 2);
  const SeqId b = e.submit(prompt(100, 30), 2);
  const SeqId late = e.submit(prompt(200, 30), 2);
  e.set_scoring(a, 0, true);
  e.set_scoring(b, 0, true);
  StepPlan p = e.step();
  ASSERT_EQ(p.work.size(), 2u);
  EXPECT_EQ(p.work[0].seq, plain);
  EXPECT_EQ(p.work[1].seq, a);
  EXPECT_EQ(p.work[1].num_tokens, 10);
  p = e.step();  // a's next chunk spends the cap first: b and the plain request behind it wait
  ASSERT_EQ(p.work.size(), 2u);
  EXPECT_EQ(p.work[1].seq, a);
  EXPECT_EQ(p.work[1].num_tokens, 10);
  e.step();
  p = e.step();  // a decodes; b takes the cap, late the rest of the budget
  ASSERT_EQ(p.work.size(), 3u);
  EXPECT_EQ(p.work[0].seq, a);
  EXPECT_EQ(p.work[1].seq, b);
  EXPECT_EQ(p.work[1].num_tokens, 10);
  EXPECT_EQ(p.work[2].seq, late);
  EXPECT_EQ(p.work[2].num_tokens, 30);
  e.run_until_idle(100);
  expect_drained(e);
}

TEST(SchedulerTest, PrefixReuseStopsAtMaxReusedTokens) {
  SimEngine e(kv_config(256, 128), sched_config(64), true);
  e.submit(prompt(1, 30), 1);
  e.run_until_idle(10);
  for (auto [limit, cached] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 0}, {7, 4}, {8, 8}, {100, 28}, {std::numeric_limits<int64_t>::max(), 28}}) {
    const SeqId s = e.submit(prompt(1, 30), 1);
    e.set_scoring(s, limit, false);
    const StepPlan p = e.step();
    ASSERT_EQ(p.admitted.size(), 1u);
    EXPECT_EQ(p.admitted[0].match.num_tokens, cached) << "limit " << limit;
    e.run_until_idle(10);
  }
  expect_drained(e);
}

TEST(SchedulerTest, WorksWithoutPrefixCache) {
  SimEngine e(kv_config(32, 32), sched_config(16), false);
  for (int i = 0; i < 6; ++i) e.submit(prompt(10 * i, 9 + i), 12);
  e.run_until_idle(1000);
  expect_drained(e);
}

}  // namespace
}  // namespace beam
