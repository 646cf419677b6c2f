// Engine::pause / resume (vLLM's /pause and /resume, SGLang's pause_generation and
// continue_generation) on the CPU: each mode treats the requests it finds as it says (keep: they
// stop where they are and go on; retract: their KV goes back and they recompute; abort: they end;
// wait: they finish first), requests sent while paused wait for the resume, weights given while
// paused apply at once without serving KV of the old weights to new requests, and a sleep while
// paused releases the KV pools only when no kept request holds them.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "engine_test_util.h"

namespace beam::testing {
namespace {

class PauseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = engine_test_model("tiny-beam");
    ASSERT_NE(weights_, nullptr);
  }
  std::unique_ptr<Engine> make(std::shared_ptr<const BeamWeights> weights) {
    return control_test_engine(std::move(weights), /*sleep_mode=*/true);
  }
  std::vector<int32_t> tokens(Engine& engine, const RunRequest& r) {
    return run_all(engine, {r})[0][0].tokens;
  }
  RunRequest request(int64_t length, int64_t seed, int64_t max_tokens) const {
    return RunRequest{tokens_of(length, seed, weights_->config.vocab_size), greedy(max_tokens)};
  }
  // The tokens `c` has received so far (none yet: empty).
  static size_t written(const Collector& c) {
    const auto r = c.results();
    return r.empty() ? 0 : r[0].tokens.size();
  }
  // Checks that nothing more arrives at `c` for a while (the engine is paused).
  static void expect_still(const Collector& c) {
    const size_t before = written(c);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    EXPECT_EQ(written(c), before);
  }

  std::shared_ptr<const BeamWeights> weights_;
};

TEST_F(PauseTest, KeptAndRetractedRequestsGoOnToAFreshEnginesTokens) {
  const RunRequest long_request = request(40, 5, 400), later = request(30, 6, 8);
  const std::vector<int32_t> want = tokens(*make(weights_), long_request);
  for (PauseMode mode : {PauseMode::kKeep, PauseMode::kRetract}) {
    SCOPED_TRACE(mode == PauseMode::kKeep ? "keep" : "retract");
    auto engine = make(weights_);
    Collector running, waiting;
    submit(*engine, long_request, &running);
    wait_for_output(running);
    ASSERT_TRUE(engine->pause(mode, /*clear_cache=*/false).ok());
    const auto paused_at = std::chrono::steady_clock::now();
    EXPECT_TRUE(engine->paused());
    EXPECT_LT(written(running), want.size());
    const EngineStats paused = engine->stats();
    if (mode == PauseMode::kRetract) {  // its KV went back (cached), and it waits
      EXPECT_EQ(paused.running, 0);
      EXPECT_EQ(paused.waiting, 1);
      EXPECT_EQ(paused.full_pool.used_blocks(), 0);
    } else {
      EXPECT_EQ(paused.running, 1);
      EXPECT_GT(paused.full_pool.used_blocks(), 0);
    }
    submit(*engine, later, &waiting);
    expect_still(running);
    EXPECT_EQ(written(waiting), 0u);
    ASSERT_TRUE(engine->pause(PauseMode::kAbort, true).ok());  // paused already: nothing changes
    ASSERT_TRUE(engine->resume().ok());
    EXPECT_FALSE(engine->paused());
    engine->wait_idle();
    EXPECT_EQ(running.results()[0].finish, FinishReason::kLength);
    EXPECT_EQ(running.results()[0].tokens, want);
    EXPECT_EQ(running.results()[0].usage.retractions, mode == PauseMode::kRetract ? 1 : 0);
    // Its first step and first token stay the ones before the pause (SGLang's timings).
    const SequenceTimes times = running.results()[0].usage.times;  // a copy: results() is a temporary
    EXPECT_LE(times.queued, times.scheduled);
    EXPECT_LE(times.scheduled, times.prefilled);
    EXPECT_LT(times.prefilled, paused_at);
    EXPECT_EQ(waiting.results()[0].tokens, tokens(*make(weights_), later));
    ASSERT_TRUE(engine->resume().ok());  // not paused: nothing changes
    engine->flush_prefix_cache();
    expect_pools_full(*engine);
  }
}

TEST_F(PauseTest, AbortEndsTheRequestsAndWaitLetsThemFinish) {
  const RunRequest long_request = request(24, 7, 400), later = request(30, 8, 8);
  auto engine = make(weights_);
  Collector aborted, waiting;
  submit(*engine, long_request, &aborted);
  wait_for_output(aborted);
  ASSERT_TRUE(engine->pause(PauseMode::kAbort, true).ok());
  EXPECT_EQ(aborted.results()[0].finish, FinishReason::kCancelled);
  EXPECT_LT(aborted.results()[0].tokens.size(), 400u);
  submit(*engine, later, &waiting);
  expect_still(waiting);
  ASSERT_TRUE(engine->resume().ok());
  engine->wait_idle();
  EXPECT_EQ(waiting.results()[0].tokens, tokens(*make(weights_), later));

  Collector finishing, held;
  submit(*engine, long_request, &finishing);
  wait_for_output(finishing);
  auto paused = std::async(std::launch::async,
                           [&] { return engine->pause(PauseMode::kWait, /*clear_cache=*/true); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  submit(*engine, later, &held);  // does not start while the pause waits, nor while paused
  ASSERT_TRUE(paused.get().ok());
  EXPECT_EQ(finishing.results()[0].finish, FinishReason::kLength);
  EXPECT_EQ(finishing.results()[0].tokens.size(), 400u);
  expect_still(held);
  EXPECT_EQ(written(held), 0u);
  EXPECT_EQ(engine->stats().full_pool.cached_blocks, 0);  // clear_cache
  ASSERT_TRUE(engine->resume().ok());
  engine->wait_idle();
  EXPECT_EQ(held.results()[0].tokens, tokens(*make(weights_), later));
}

// Weights given while paused apply at once, requests in flight or not; a kept request goes on
// with its KV, and a new request with its prompt neither matches the KV the old weights cached
// nor gives other tokens than a fresh engine on the new weights; a retracted one recomputes on
// the new weights (which a new request may then reuse).
TEST_F(PauseTest, WeightsGivenWhilePausedServeNoOldKv) {
  const std::shared_ptr<const BeamWeights> other = other_synthetic_weights(weights_->config);
  ASSERT_NE(other, nullptr);
  const RunRequest long_request = request(40, 9, 400);
  const RunRequest same_prompt{long_request.prompt, greedy(8)};
  for (PauseMode mode : {PauseMode::kKeep, PauseMode::kRetract}) {
    SCOPED_TRACE(mode == PauseMode::kKeep ? "keep" : "retract");
    auto engine = make(weights_);
    Collector running;
    submit(*engine, long_request, &running);
    wait_for_output(running);
    ASSERT_TRUE(engine->pause(mode, false).ok());
    const size_t before = written(running);
    auto updated =
        std::async(std::launch::async, [&] { return engine->update_weights(other, false); });
    ASSERT_EQ(updated.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    ASSERT_TRUE(updated.get().ok());
    ASSERT_TRUE(engine->resume().ok());
    const auto fresh = run_all(*engine, {same_prompt})[0][0];
    if (mode == PauseMode::kKeep) {  // (a retracted request may have cached it anew by now)
      EXPECT_EQ(fresh.usage.cached_prompt_tokens, 0);
    }
    EXPECT_EQ(fresh.tokens, tokens(*make(other), same_prompt));
    engine->wait_idle();
    const auto done = running.results()[0];
    EXPECT_EQ(done.finish, FinishReason::kLength);
    ASSERT_EQ(done.tokens.size(), 400u);
    const std::vector<int32_t> old_run = tokens(*make(weights_), long_request);
    EXPECT_TRUE(std::equal(done.tokens.begin(), done.tokens.begin() + static_cast<long>(before),
                           old_run.begin()));
    EXPECT_NE(done.tokens, old_run);  // the rest came from the new weights
  }
}

TEST_F(PauseTest, ASleepWhilePausedReleasesTheKvOnlyWhenNoKeptRequestHoldsIt) {
  const RunRequest long_request = request(32, 11, 400);
  const std::vector<int32_t> want = tokens(*make(weights_), long_request);
  auto engine = make(weights_);
  Collector running;
  submit(*engine, long_request, &running);
  wait_for_output(running);
  ASSERT_TRUE(engine->pause(PauseMode::kKeep, false).ok());
  const Status kept = engine->sleep(SleepLevel::kOffloadWeights, /*weights=*/false, true);
  ASSERT_FALSE(kept.ok());
  EXPECT_EQ(kept.error().message,
            "requests kept through the pause hold the KV cache; release the weights alone, or "
            "pause with mode abort or retract to release it");
  EXPECT_FALSE(engine->sleep_state().asleep());
  ASSERT_TRUE(engine->resume().ok());
  wait_for_output(running);
  ASSERT_TRUE(engine->pause(PauseMode::kRetract, false).ok());
  ASSERT_TRUE(engine->sleep(SleepLevel::kOffloadWeights, false, true).ok());
  EXPECT_TRUE(engine->sleep_state().kv_released);
  ASSERT_TRUE(engine->wake_up(false, true).ok());
  expect_still(running);  // awake but still paused
  ASSERT_TRUE(engine->resume().ok());
  engine->wait_idle();
  EXPECT_EQ(running.results()[0].tokens, want);
}

}  // namespace
}  // namespace beam::testing
