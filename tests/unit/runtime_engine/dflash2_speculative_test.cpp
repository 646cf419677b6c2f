// Speculative decoding with DFlash2 drafts (EngineOptions::speculative.dflash2_drafter) on
// tiny-beam with models/tiny-beam-dflash2: tokens, logprobs, finishes and routed experts equal
// plain decoding's while the drafter's blocks are verified and some accepted; the pools are whole
// afterwards; bad drafter settings are refused with errors that name them.
#include <gtest/gtest.h>

#include <string>

#include "engine_test_util.h"

namespace beam::testing {
namespace {

const std::string kDrafter = std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam-dflash2";
// The same drafter trained on tiny-beam's greedy text (tools/reference/train_tiny_drafter.py).
const std::string kTrained =
    std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam-dflash2-trained";

EngineOptions tiny_options(int64_t kv_bytes, int64_t step_tokens) {
  EngineOptions o;
  o.num_threads = 2;
  o.block_size_tokens = 4;
  o.kv_budget_bytes = kv_bytes;
  o.max_tokens_per_step = step_tokens;
  o.max_running = 8;
  return o;
}

// drafter empty: no speculation.
std::unique_ptr<Engine> tiny_engine(const std::string& drafter, int64_t kv_bytes = 16 << 20,
                                    int64_t step_tokens = 128) {
  auto weights = engine_test_model("tiny-beam");
  if (!weights) return nullptr;
  EngineOptions o = tiny_options(kv_bytes, step_tokens);
  o.speculative.dflash2_drafter = drafter;
  auto e = Engine::create(weights, o);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::move(*e) : nullptr;
}

// Runs `reqs` without drafts and with the drafter; returns the drafting engine's stats.
EngineStats compare_with_plain(const std::vector<RunRequest>& reqs, int64_t kv_bytes = 16 << 20,
                               int64_t step_tokens = 128, const std::string& drafter = kTrained) {
  auto plain = tiny_engine("", kv_bytes, step_tokens);
  auto spec = tiny_engine(drafter, kv_bytes, step_tokens);
  if (!plain || !spec) return {};
  expect_same_results(run_all(*plain, reqs), run_all(*spec, reqs));
  spec->flush_prefix_cache();
  expect_pools_full(*spec);
  return spec->stats();
}

std::vector<RunRequest> greedy_requests(int n, int64_t prompt_len, int64_t max_tokens) {
  std::vector<RunRequest> reqs;
  for (int i = 0; i < n; ++i)
    reqs.push_back(RunRequest{tokens_of(prompt_len, 40 + static_cast<uint64_t>(i), 512),
                              greedy(max_tokens), "", /*return_routed_experts=*/true});
  return reqs;
}

// Greedy requests with routed experts: the trained drafter's blocks are verified, some drafts
// accepted, and the tokens are plain decoding's; so with the untrained drafter (all rejected).
TEST(DFlash2Speculation, GreedyTokensEqualPlainDecodingAndDraftsAreAccepted) {
  const EngineStats s = compare_with_plain(greedy_requests(8, 20, 40));
  EXPECT_GT(s.spec_verifications, 0);
  // The drafter's pool: every sequence finished and its context cached; the drafter keeps one
  // page of its own.
  EXPECT_GT(s.draft_context_pages, 0);
  EXPECT_GT(s.draft_context_cached_pages, 0);
  EXPECT_EQ(s.draft_context_free_pages + s.draft_context_cached_pages + 1, s.draft_context_pages);
  EXPECT_GT(s.spec_accepted_tokens, 0);
  EXPECT_LE(s.spec_draft_tokens, 3 * s.spec_verifications);  // block_size 4: 3 drafts a block
  EXPECT_LT(s.steps, 8 * 40);  // some steps took several tokens of a sequence
  const EngineStats untrained =
      compare_with_plain(greedy_requests(4, 20, 24), 16 << 20, 128, kDrafter);
  EXPECT_GT(untrained.spec_verifications, 0);
}

// Seeded sampling with logprobs and n = 2 (the second sample forked from the first, its drafter
// context copied), then a prompt seen before (a prefix-cache hit: the cached positions are not in
// the drafter's context, which only costs acceptance).
TEST(DFlash2Speculation, SampledSiblingsAndCachedPromptsEqualPlainDecoding) {
  std::vector<RunRequest> reqs;
  for (uint64_t seed : {3, 4}) {
    SamplingParams sp;
    sp.temperature = 0.8;
    sp.seed = seed;
    sp.max_tokens = 30;
    sp.n = 2;
    sp.logprobs = true;
    sp.top_logprobs = 2;
    reqs.push_back(RunRequest{tokens_of(18, 70, 512), sp});
  }
  reqs.push_back(RunRequest{tokens_of(18, 70, 512), greedy(30)});
  const EngineStats s = compare_with_plain(reqs);
  EXPECT_GT(s.spec_verifications, 0);
}

// A KV budget that preempts: recomputed positions refill the drafter's context.
TEST(DFlash2Speculation, PreemptedSequencesResumeWithTheSameTokens) {
  const EngineStats s = compare_with_plain(greedy_requests(6, 24, 48), /*kv_bytes=*/3 << 19,
                                           /*step_tokens=*/32);
  EXPECT_GT(s.preemptions, 0);
  EXPECT_GT(s.spec_verifications, 0);
}

// A context pool of 2 pages (the drafter keeps one) for 6 sequences of ~70 positions: most
// positions find no page and stay absent, finished contexts are evicted for running ones; drafts
// get worse, never the tokens.
TEST(DFlash2Speculation, AContextPoolTooSmallCostsAcceptanceOnly) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  const std::vector<RunRequest> reqs = greedy_requests(6, 24, 48);
  auto plain = tiny_engine("");
  EngineOptions o = tiny_options(16 << 20, 128);
  o.speculative.dflash2_drafter = kTrained;
  o.speculative.dflash2_context_pool_bytes = 1;  // the least: 2 pages
  auto spec = Engine::create(weights, o);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  expect_same_results(run_all(*plain, reqs), run_all(**spec, reqs));
  expect_same_results(run_all(*plain, reqs), run_all(**spec, reqs));  // cached prompts
  EXPECT_GT((*spec)->stats().spec_verifications, 0);
}

// Sleep mode (an RL trainer's weight sync): the drafter's context pool and scratch go with the
// KV pools and come back with them; the finished contexts are dropped; afterwards the engine
// drafts again and its tokens are still plain decoding's.
TEST(DFlash2Speculation, SleepReleasesTheDraftersMemoryAndWakeUpRestoresIt) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  EngineOptions o = tiny_options(16 << 20, 128);
  o.enable_sleep_mode = true;
  o.speculative.dflash2_drafter = kTrained;
  o.speculative.dflash2_context_pool_bytes = 8 << 20;
  auto spec = Engine::create(weights, o);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  o.speculative.dflash2_drafter.clear();
  o.kv_budget_bytes = 8 << 20;  // the drafting engine's KV pools: its budget less the drafter's pool
  auto plain = Engine::create(weights, o);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  const std::vector<RunRequest> reqs = greedy_requests(4, 20, 30);
  const auto want = run_all(**plain, reqs);
  expect_same_results(want, run_all(**spec, reqs));
  const int64_t accepted = (*spec)->stats().spec_accepted_tokens;
  ASSERT_TRUE((*plain)->sleep(SleepLevel::kOffloadWeights).ok());
  ASSERT_TRUE((*spec)->sleep(SleepLevel::kOffloadWeights).ok());
  // Beside what the plain engine gives back: the drafter's pool (8 MiB less part of a page) and
  // its scratch.
  EXPECT_GE((*spec)->sleep_state().released_bytes - (*plain)->sleep_state().released_bytes,
            (8 << 20) - (1 << 16));
  ASSERT_TRUE((*spec)->wake_up(true, true).ok());
  expect_same_results(want, run_all(**spec, reqs));
  EXPECT_GT((*spec)->stats().spec_accepted_tokens, accepted);
  (*spec)->flush_prefix_cache();
  expect_pools_full(**spec);
}

// The drafter reads the target's embedding and LM head: after a weight update it reads the new
// ones (on the CPU the update's weights are new buffers, the old ones freed once no request holds
// them; with two ranks rank 0's gathered head is gathered again). The updated engine drafts,
// verifies and accepts exactly as an engine started on the new weights.
TEST(DFlash2Speculation, WeightUpdatesReachTheDrafter) {
  const BeamConfig config = engine_test_model("tiny-beam")->config;
  for (int tp : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << tp << " rank(s)");
    EngineOptions o = tiny_options(16 << 20, 128);
    o.tensor_parallel_size = tp;
    o.speculative.dflash2_drafter = kTrained;
    auto first = load_beam_weights(std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam");
    ASSERT_TRUE(first.ok()) << first.error().message;
    auto updated = Engine::create(std::move(*first), o);  // the engine holds the only reference
    ASSERT_TRUE(updated.ok()) << updated.error().message;
    const std::vector<RunRequest> reqs = greedy_requests(4, 20, 30);
    (void)run_all(**updated, reqs);
    const std::shared_ptr<const BeamWeights> next = other_synthetic_weights(config);
    ASSERT_TRUE((*updated)->update_weights(next, /*abort_in_flight=*/false).ok());
    const EngineStats before = (*updated)->stats();
    auto fresh = Engine::create(next, o);
    ASSERT_TRUE(fresh.ok()) << fresh.error().message;
    expect_same_results(run_all(**fresh, reqs), run_all(**updated, reqs));
    const EngineStats after = (*updated)->stats(), want = (*fresh)->stats();
    EXPECT_GT(want.spec_verifications, 0);
    EXPECT_EQ(after.spec_verifications - before.spec_verifications, want.spec_verifications);
    EXPECT_EQ(after.spec_accepted_tokens - before.spec_accepted_tokens, want.spec_accepted_tokens);
  }
}

TEST(DFlash2Speculation, BadSettingsAreRefused) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  auto error_of = [&](EngineOptions o) {
    auto e = Engine::create(weights, o);
    return e.ok() ? std::string("(created)") : e.error().message;
  };
  EngineOptions o = tiny_options(16 << 20, 128);
  o.speculative.dflash2_drafter = kDrafter;
  o.speculative.num_draft_tokens = 4;  // the block holds 3
  EXPECT_NE(error_of(o).find("at most 3"), std::string::npos) << error_of(o);
  o.speculative.num_draft_tokens = 0;
  o.speculative.dflash2_drafter = std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam";
  EXPECT_NE(error_of(o).find("dflash_config"), std::string::npos) << error_of(o);
  o.speculative.dflash2_drafter = "/nonexistent";
  EXPECT_NE(error_of(o).find("/nonexistent"), std::string::npos) << error_of(o);
  o.speculative.dflash2_drafter = kDrafter;
  o.speculative.dflash2_context_pool_bytes = -1;
  EXPECT_NE(error_of(o).find("dflash2_context_pool_bytes"), std::string::npos) << error_of(o);
  o.speculative.dflash2_context_pool_bytes = 17 << 20;  // more than the KV budget
  EXPECT_NE(error_of(o).find("leaves nothing of the KV budget"), std::string::npos) << error_of(o);
}

// Two tensor-parallel ranks (threads): rank 0 captures the residuals (whole after each
// all-reduce) and drafts with the LM head gathered from both ranks' vocabulary halves; the tokens
// equal the same two ranks' plain decoding, and drafts are accepted as on one rank.
TEST(DFlash2Speculation, TensorParallelRanksDraftWithTheWholeLmHead) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  EngineOptions o = tiny_options(16 << 20, 128);
  o.tensor_parallel_size = 2;
  auto plain = Engine::create(weights, o);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  o.speculative.dflash2_drafter = kTrained;
  auto spec = Engine::create(weights, o);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const std::vector<RunRequest> reqs = greedy_requests(6, 20, 40);
  expect_same_results(run_all(**plain, reqs), run_all(**spec, reqs));
  const EngineStats tp = (*spec)->stats();
  EXPECT_GT(tp.spec_verifications, 0);
  EXPECT_GT(tp.spec_accepted_tokens, 0);
  // One rank drafts the same text about as well (the ranks' fp32 sums differ in order only).
  const EngineStats one = compare_with_plain(greedy_requests(6, 20, 40));
  EXPECT_GE(tp.spec_accepted_tokens, one.spec_accepted_tokens * 3 / 4);  // 29 and 29 (45 each)
}

}  // namespace
}  // namespace beam::testing
