// Finish checks over multi-token steps: the first finishing token ends the step, whether it is a
// stop id, an eos, max_tokens or the context limit; min_tokens and ignore_eos are honoured.
#include "runtime/sampling/finish_check.h"

#include <gtest/gtest.h>

#include <vector>

#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::make_state;
using testing::StateOptions;

StateOptions options() {
  StateOptions o;
  o.vocab_size = 32;
  o.prompt = std::vector<int32_t>(10, 4);
  o.eos = {0, 1};
  return o;
}

StepFinish check(const SequenceSamplingState& seq, std::vector<int32_t> step) {
  return check_finish(seq, step);
}

TEST(SamplingFinish, NoFinishAcceptsTheWholeStep) {
  SequenceSamplingState seq = make_state(SamplingParams(), options());
  StepFinish f = check(seq, {5, 6, 7});
  EXPECT_EQ(f.num_accepted, 3);
  EXPECT_FALSE(f.cause.has_value());
}

TEST(SamplingFinish, StopTokenInTheMiddleOfABlock) {
  SamplingParams p;
  p.stop_token_ids = {9, 12};
  SequenceSamplingState seq = make_state(p, options());
  StepFinish f = check(seq, {5, 12, 9, 6});
  EXPECT_EQ(f.num_accepted, 2);  // the stop token is kept, everything after it dropped
  EXPECT_EQ(f.cause, FinishCause::kStopTokenId);
  EXPECT_EQ(f.stop_token, 12);
  EXPECT_EQ(finish_reason_name(*f.cause), "stop");
}

TEST(SamplingFinish, EosStopsUnlessIgnored) {
  SamplingParams p;
  SequenceSamplingState seq = make_state(p, options());
  StepFinish f = check(seq, {5, 1, 6});
  EXPECT_EQ(f.num_accepted, 2);
  EXPECT_EQ(f.cause, FinishCause::kEos);
  EXPECT_EQ(f.stop_token, 1);
  p.ignore_eos = true;
  SequenceSamplingState ignoring = make_state(p, options());
  f = check(ignoring, {5, 1, 0, 6});
  EXPECT_EQ(f.num_accepted, 4);
  EXPECT_FALSE(f.cause.has_value());
  p.stop_token_ids = {0};  // ignore_eos does not ignore explicit stop ids
  SequenceSamplingState stop_zero = make_state(p, options());
  f = check(stop_zero, {5, 1, 0, 6});
  EXPECT_EQ(f.num_accepted, 3);
  EXPECT_EQ(f.cause, FinishCause::kStopTokenId);
}

TEST(SamplingFinish, MaxTokensInTheMiddleOfABlock) {
  SamplingParams p;
  p.max_tokens = 10;
  p.stop_token_ids = {9};
  SequenceSamplingState seq = make_state(p, options());
  seq.append_output(std::vector<int32_t>(8, 5));
  StepFinish f = check(seq, {6, 7, 9, 8});  // the stop id after the limit must not win
  EXPECT_EQ(f.num_accepted, 2);
  EXPECT_EQ(f.cause, FinishCause::kMaxTokens);
  EXPECT_EQ(f.stop_token, -1);
  EXPECT_EQ(finish_reason_name(*f.cause), "length");
  // A stop id on the last allowed token is a stop, not a length finish.
  f = check(seq, {6, 9, 8});
  EXPECT_EQ(f.num_accepted, 2);
  EXPECT_EQ(f.cause, FinishCause::kStopTokenId);
}

TEST(SamplingFinish, ContextLimitWhenItComesFirst) {
  SamplingParams p;
  p.max_tokens = 100;
  StateOptions o = options();
  o.max_context_tokens = 14;  // 10 prompt tokens: room for 4
  SequenceSamplingState seq = make_state(p, o);
  EXPECT_EQ(seq.output_limit_tokens(), 4);
  StepFinish f = check(seq, {5, 6, 7, 8, 9});
  EXPECT_EQ(f.num_accepted, 4);
  EXPECT_EQ(f.cause, FinishCause::kContextLimit);
  p.max_tokens = 4;  // equal: reported as max_tokens
  SequenceSamplingState capped = make_state(p, o);
  EXPECT_EQ(check(capped, {5, 6, 7, 8, 9}).cause, FinishCause::kMaxTokens);
}

TEST(SamplingFinish, StopTokensBeforeMinTokensAreOrdinary) {
  SamplingParams p;
  p.min_tokens = 3;
  p.stop_token_ids = {9};
  SequenceSamplingState seq = make_state(p, options());
  seq.append_output(std::vector<int32_t>{5});
  // Output indices 1 and 2 are below min_tokens; index 3 may stop.
  StepFinish f = check(seq, {0, 9, 1, 6});
  EXPECT_EQ(f.num_accepted, 3);
  EXPECT_EQ(f.cause, FinishCause::kEos);
  EXPECT_EQ(f.stop_token, 1);
}

TEST(SamplingFinish, PromptFillingTheContextIsAnError) {
  SequenceSamplingSetup setup;
  setup.params = std::make_shared<const SamplingParams>();
  std::vector<int32_t> prompt(8, 1);
  setup.prompt_tokens = prompt;
  setup.vocab_size = 16;
  setup.max_context_tokens = 8;
  auto state = SequenceSamplingState::create(setup);
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.error().message.find("leaves no room"), std::string::npos);
  setup.max_context_tokens = 9;
  setup.sibling_index = 1;  // n = 1
  state = SequenceSamplingState::create(setup);
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.error().message.find("sibling_index"), std::string::npos);
}

}  // namespace
}  // namespace beam
