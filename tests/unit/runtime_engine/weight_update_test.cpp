// Engine::update_weights (SGLang's update_weights_from_disk) on the CPU: afterwards the engine
// gives a fresh engine's tokens on the new weights and reuses no prefix cached under the old ones;
// a request in flight finishes on the old weights (or ends when the update aborts it) and a
// request sent meanwhile runs on the new ones; weights of another architecture are an error that
// leaves the old weights serving.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "engine_test_util.h"

namespace beam::testing {
namespace {

class WeightUpdateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_ = engine_test_model("tiny-beam");
    ASSERT_NE(old_, nullptr);
    new_ = other_synthetic_weights(old_->config);
    ASSERT_NE(new_, nullptr);
  }
  std::unique_ptr<Engine> make(std::shared_ptr<const BeamWeights> weights) {
    return control_test_engine(std::move(weights), /*sleep_mode=*/false);
  }
  std::vector<int32_t> tokens(Engine& engine, const RunRequest& r) {
    return run_all(engine, {r})[0][0].tokens;
  }

  std::shared_ptr<const BeamWeights> old_, new_;
};

TEST_F(WeightUpdateTest, ServesTheNewWeightsAsAFreshEngineWould) {
  const RunRequest r{tokens_of(40, 3, old_->config.vocab_size), greedy(12)};
  auto engine = make(old_);
  const std::vector<int32_t> before = tokens(*engine, r);  // its prompt is now cached
  EXPECT_EQ(before, tokens(*make(old_), r));
  ASSERT_TRUE(engine->update_weights(new_, /*abort_in_flight=*/false).ok());
  const auto after = run_all(*engine, {r})[0][0];
  EXPECT_EQ(after.tokens, tokens(*make(new_), r));
  EXPECT_NE(after.tokens, before);
  EXPECT_EQ(after.usage.cached_prompt_tokens, 0);  // KV of the old weights is never reused

  BeamConfig other = old_->config;
  other.rms_norm_eps *= 2;
  const Status st = engine->update_weights(other_synthetic_weights(other), false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message,
            "the new weights' config differs from the served model's in 'rms_norm_eps'");
  EXPECT_EQ(tokens(*engine, r), after.tokens);
}

// The engine keeps no reference to weights it no longer serves (an RL loop updates every step).
TEST_F(WeightUpdateTest, ReleasesTheWeightsItNoLongerServes) {
  std::shared_ptr<const BeamWeights> first = other_synthetic_weights(old_->config);
  const std::weak_ptr<const BeamWeights> watch = first;
  auto engine = make(std::move(first));
  const RunRequest r{tokens_of(20, 3, old_->config.vocab_size), greedy(4)};
  tokens(*engine, r);
  EXPECT_FALSE(watch.expired());
  ASSERT_TRUE(engine->update_weights(new_, /*abort_in_flight=*/false).ok());
  EXPECT_TRUE(watch.expired());
}

TEST_F(WeightUpdateTest, RequestsInFlightFinishOnTheOldWeightsUnlessAborted) {
  const int64_t vocab = old_->config.vocab_size;
  const RunRequest long_request{tokens_of(24, 5, vocab), greedy(300)};
  const RunRequest later{tokens_of(30, 6, vocab), greedy(8)};
  auto engine = make(old_);
  Collector running, waiting;
  submit(*engine, long_request, &running);
  wait_for_output(running);
  auto update = std::async(std::launch::async, [&] { return engine->update_weights(new_, false); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  submit(*engine, later, &waiting);  // waits for the update
  ASSERT_TRUE(update.get().ok());
  engine->wait_idle();
  EXPECT_EQ(running.results()[0].tokens, tokens(*make(old_), long_request));
  EXPECT_EQ(running.results()[0].finish, FinishReason::kLength);
  EXPECT_EQ(waiting.results()[0].tokens, tokens(*make(new_), later));

  Collector aborted;
  submit(*engine, long_request, &aborted);
  wait_for_output(aborted);
  ASSERT_TRUE(engine->update_weights(old_, /*abort_in_flight=*/true).ok());
  engine->wait_idle();
  EXPECT_EQ(aborted.results()[0].finish, FinishReason::kCancelled);
  EXPECT_LT(aborted.results()[0].tokens.size(), 300u);
  EXPECT_EQ(tokens(*engine, later), tokens(*make(old_), later));
}

// An update's weights are read once it holds the updates' turn and while the engine serves: a
// second update meanwhile is refused before it reads anything (two concurrent updates of a large
// checkpoint used to hold two host copies), requests keep running during the read, and a read's
// error is the update's, the old weights serving.
TEST_F(WeightUpdateTest, ASecondUpdateWhileOneReadsIsRefusedBeforeItReads) {
  const int64_t vocab = old_->config.vocab_size;
  const RunRequest r{tokens_of(24, 5, vocab), greedy(6)};
  auto engine = make(old_);
  std::promise<void> reading, read;
  std::shared_future<void> may_finish = read.get_future().share();
  auto first = std::async(std::launch::async, [&] {
    return engine->update_weights(
        [&]() -> Expected<RankWeights> {
          reading.set_value();
          may_finish.wait();
          return slices_of(new_);
        },
        /*abort_in_flight=*/false);
  });
  reading.get_future().wait();
  bool second_read = false;
  const Status second = engine->update_weights(
      [&]() -> Expected<RankWeights> {
        second_read = true;
        return slices_of(new_);
      },
      /*abort_in_flight=*/false);
  EXPECT_FALSE(second_read);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().message, "another weight update is in progress");
  EXPECT_EQ(tokens(*engine, r), tokens(*make(old_), r));  // the engine serves during the read
  read.set_value();
  ASSERT_TRUE(first.get().ok());
  EXPECT_EQ(tokens(*engine, r), tokens(*make(new_), r));

  const Status failed = engine->update_weights(
      []() -> Expected<RankWeights> { return make_error("loading 'x': no such folder"); },
      /*abort_in_flight=*/false);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message, "loading 'x': no such folder");
  EXPECT_EQ(tokens(*engine, r), tokens(*make(new_), r));
}

// A weight update, a sleep or a pause in wait mode called while the only requests are running
// applies once they finish, with nothing else queued (before, the engine waited for new work
// first: an RL loop updating after its last requests hung). Each call must return within 30 s.
TEST_F(WeightUpdateTest, CommandsWaitingForTheLastRequestsApplyWhenTheyFinish) {
  const RunRequest r{tokens_of(24, 5, old_->config.vocab_size), greedy(40)};
  auto engine = make(old_);
  const auto within = [](std::future<Status>& f) {
    return f.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  };
  {
    Collector c;
    submit(*engine, r, &c);
    wait_for_output(c);
    auto update = std::async(std::launch::async, [&] { return engine->update_weights(new_, false); });
    ASSERT_TRUE(within(update)) << "the update never applied";
    EXPECT_TRUE(update.get().ok());
    EXPECT_EQ(c.results()[0].finish, FinishReason::kLength);
  }
  {
    Collector c;
    submit(*engine, r, &c);
    wait_for_output(c);
    auto pause = std::async(std::launch::async, [&] {
      return engine->pause(PauseMode::kWait, /*clear_cache=*/false);
    });
    ASSERT_TRUE(within(pause)) << "the pause never applied";
    EXPECT_TRUE(pause.get().ok());
    EXPECT_TRUE(engine->paused());
    EXPECT_EQ(c.results()[0].tokens.size(), 40u);
    ASSERT_TRUE(engine->resume().ok());
  }
}

}  // namespace
}  // namespace beam::testing
