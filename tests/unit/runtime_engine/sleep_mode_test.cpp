// Engine::sleep / wake_up (vLLM's sleep mode, SGLang's release / resume_memory_occupation) on the
// CPU, where the KV pools' pages go back (the weights stay in host memory): a request in flight
// finishes first, requests sent while asleep wait and then give a fresh engine's tokens, the prefix
// cache starts empty, new weights can be given while asleep, and the errors (sleep mode off,
// asleep twice) leave the engine serving.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "engine_test_util.h"

namespace beam::testing {
namespace {

class SleepModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = engine_test_model("tiny-beam");
    ASSERT_NE(weights_, nullptr);
  }
  std::unique_ptr<Engine> make(std::shared_ptr<const BeamWeights> weights, bool sleep_mode) {
    return control_test_engine(std::move(weights), sleep_mode);
  }
  std::vector<int32_t> tokens(Engine& engine, const RunRequest& r) {
    return run_all(engine, {r})[0][0].tokens;
  }
  RunRequest request(int64_t length, int64_t seed, int64_t max_tokens) const {
    return RunRequest{tokens_of(length, seed, weights_->config.vocab_size), greedy(max_tokens)};
  }

  std::shared_ptr<const BeamWeights> weights_;
};

TEST_F(SleepModeTest, RequestsSentWhileAsleepRunAfterTheWakeUp) {
  const RunRequest r = request(40, 3, 12), later = request(30, 4, 8);
  auto engine = make(weights_, true);
  const auto before = run_all(*engine, {r})[0][0];  // its prompt is now cached
  ASSERT_TRUE(engine->sleep(SleepLevel::kOffloadWeights).ok());
  SleepState s = engine->sleep_state();
  EXPECT_TRUE(s.kv_released);
  EXPECT_FALSE(s.weights_released);  // the CPU's weights are host memory already
  EXPECT_TRUE(s.asleep());
  EXPECT_GT(s.released_bytes, 0);  // the KV pools
  const Status twice = engine->sleep(SleepLevel::kOffloadWeights);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().message, "the engine is already asleep");

  Collector waiting;
  submit(*engine, later, &waiting);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(waiting.results().empty() || waiting.results()[0].tokens.empty());
  ASSERT_TRUE(engine->wake_up(/*weights=*/true, /*kv_cache=*/false).ok());
  EXPECT_TRUE(engine->sleep_state().kv_released);  // half awake: still nothing runs
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(waiting.results().empty() || waiting.results()[0].tokens.empty());
  ASSERT_TRUE(engine->wake_up(false, true).ok());
  EXPECT_FALSE(engine->sleep_state().asleep());
  engine->wait_idle();
  EXPECT_EQ(waiting.results()[0].tokens, tokens(*make(weights_, false), later));

  const auto after = run_all(*engine, {r})[0][0];
  EXPECT_EQ(after.tokens, before.tokens);
  EXPECT_EQ(after.usage.cached_prompt_tokens, 0);  // the cache went with the pools
  expect_pools_full(*engine);
}

TEST_F(SleepModeTest, ARequestInFlightFinishesBeforeTheEngineSleeps) {
  const RunRequest long_request = request(24, 5, 300), later = request(30, 6, 8);
  auto engine = make(weights_, true);
  Collector running, waiting;
  submit(*engine, long_request, &running);
  wait_for_output(running);
  auto slept =
      std::async(std::launch::async, [&] { return engine->sleep(SleepLevel::kDiscardWeights); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  submit(*engine, later, &waiting);  // neither starts before the sleep nor runs during it
  ASSERT_TRUE(slept.get().ok());
  EXPECT_EQ(running.results()[0].finish, FinishReason::kLength);
  EXPECT_EQ(running.results()[0].tokens, tokens(*make(weights_, false), long_request));
  EXPECT_TRUE(waiting.results().empty() || waiting.results()[0].tokens.empty());
  // New weights while asleep (the CPU's weights are never released), served after the wake-up.
  const std::shared_ptr<const BeamWeights> other = other_synthetic_weights(weights_->config);
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(engine->update_weights(other, false).ok());
  EXPECT_TRUE(engine->sleep_state().kv_released);
  ASSERT_TRUE(engine->wake_up(true, true).ok());
  EXPECT_FALSE(engine->sleep_state().asleep());
  engine->wait_idle();
  EXPECT_EQ(waiting.results()[0].tokens, tokens(*make(other, false), later));
}

// SGLang's tags: the KV cache alone sleeps and wakes; on the CPU the weights alone are nothing to
// release; a part released twice is an error that changes nothing.
TEST_F(SleepModeTest, TheKvCacheSleepsAlone) {
  const RunRequest r = request(20, 8, 6);
  auto engine = make(weights_, true);
  const std::vector<int32_t> before = tokens(*engine, r);
  ASSERT_TRUE(
      engine->sleep(SleepLevel::kOffloadWeights, /*weights=*/false, /*kv_cache=*/true).ok());
  EXPECT_TRUE(engine->sleep_state().kv_released);
  EXPECT_EQ(engine->sleep(SleepLevel::kOffloadWeights, false, true).error().message,
            "the engine is already asleep");
  EXPECT_EQ(engine->sleep(SleepLevel::kOffloadWeights, true, false).error().message,
            "nothing to release: the CPU's weights are host memory");
  EXPECT_EQ(engine->sleep(SleepLevel::kOffloadWeights, false, false).error().message,
            "nothing to release: name the weights or the KV cache");
  ASSERT_TRUE(engine->wake_up(false, true).ok());
  EXPECT_FALSE(engine->sleep_state().asleep());
  EXPECT_EQ(tokens(*engine, r), before);
}

TEST_F(SleepModeTest, WithoutSleepModeTheEngineStaysAwake) {
  const RunRequest r = request(20, 7, 6);
  auto engine = make(weights_, false);
  const Status st = engine->sleep(SleepLevel::kOffloadWeights);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(
      st.error().message,
      "sleep mode is off: start the engine with enable_sleep_mode (serve --enable-sleep-mode)");
  EXPECT_FALSE(engine->wake_up(true, true).ok());
  EXPECT_FALSE(engine->sleep_state().asleep());
  EXPECT_EQ(tokens(*engine, r), tokens(*make(weights_, false), r));
}

}  // namespace
}  // namespace beam::testing
