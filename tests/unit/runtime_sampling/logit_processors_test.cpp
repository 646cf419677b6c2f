// Logit processors against hand computations: logit_bias, min_tokens masking, HF repetition
// penalty, OpenAI frequency/presence penalties, pending (speculative) tokens; greedy ties.
#include "runtime/sampling/logit_processors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/sampling/sampler.h"
#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::make_state;
using testing::StateOptions;

constexpr int64_t kProcessorVocab = 8;
const std::vector<float> kLogits = {2.0f, -1.0f, 0.5f, 0.0f, -2.0f, 3.0f, 1.0f, -0.5f};

std::vector<float> processed(const SequenceSamplingState& seq,
                             std::span<const int32_t> pending = {}) {
  std::vector<TokenCandidate> row;
  for (int32_t i = 0; i < kProcessorVocab; ++i) row.push_back({kLogits[i], i});
  apply_logit_processors(row, seq, pending);
  std::vector<float> out;
  for (const TokenCandidate& c : row) out.push_back(c.value);
  return out;
}

StateOptions options(std::vector<int32_t> prompt) {
  StateOptions o;
  o.vocab_size = kProcessorVocab;
  o.prompt = std::move(prompt);
  o.eos = {7};
  return o;
}

void commit(SequenceSamplingState& seq, std::vector<int32_t> tokens) { seq.append_output(tokens); }

TEST(SamplingPenalties, NothingActiveLeavesTheRowUnchanged) {
  SequenceSamplingState seq = make_state(SamplingParams(), options({0, 5}));
  commit(seq, {1, 2});
  EXPECT_EQ(processed(seq), kLogits);
  EXPECT_TRUE(seq.output_counts().empty());  // no counts kept without penalties
}

TEST(SamplingPenalties, RepetitionPenaltyOverPromptAndOutputOnce) {
  SamplingParams p;
  p.repetition_penalty = 2.0;
  SequenceSamplingState seq = make_state(p, options({0, 1, 0, 5}));
  commit(seq, {5, 4, 4});  // 5 is in prompt and output: penalised once
  std::vector<float> want = kLogits;
  want[0] = 2.0f / 2;    // positive: divided
  want[1] = -1.0f * 2;   // negative: multiplied
  want[5] = 3.0f / 2;
  want[4] = -2.0f * 2;
  EXPECT_EQ(processed(seq), want);
  // Pending tokens count too; a pending token already seen is not penalised twice.
  std::vector<int32_t> pending = {2, 2, 5};
  want[2] = 0.5f / 2;
  EXPECT_EQ(processed(seq, pending), want);
}

TEST(SamplingPenalties, FrequencyAndPresenceOverOutputOnly) {
  SamplingParams p;
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  SequenceSamplingState seq = make_state(p, options({3, 3, 3}));  // the prompt does not count
  commit(seq, {6, 6, 6, 2});
  std::vector<float> want = kLogits;
  want[6] = static_cast<float>(1.0 - 0.5 * 3 - 0.25);
  want[2] = static_cast<float>(0.5 - 0.5 * 1 - 0.25);
  EXPECT_EQ(processed(seq), want);
  std::vector<int32_t> pending = {6, 1, 1};
  want[6] = static_cast<float>(1.0 - 0.5 * 4 - 0.25);
  want[1] = static_cast<float>(-1.0 - 0.5 * 2 - 0.25);
  EXPECT_EQ(processed(seq, pending), want);
}

TEST(SamplingPenalties, OrderIsBiasThenRepetitionThenFrequencyPresence) {
  SamplingParams p;
  p.logit_bias = {{3, 1.0}, {4, -0.5}};
  p.repetition_penalty = 1.5;
  p.frequency_penalty = 1.0;
  p.presence_penalty = -0.5;
  SequenceSamplingState seq = make_state(p, options({}));
  commit(seq, {3, 3});
  std::vector<float> want = kLogits;
  // token 3: 0 + 1 (bias) = 1 → / 1.5 (positive) → - 1 * 2 + 0.5
  want[3] = static_cast<float>(1.0 / 1.5 - 2.0 + 0.5);
  want[4] = -2.5f;  // bias only
  std::vector<float> got = processed(seq);
  for (int i = 0; i < kProcessorVocab; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << "token " << i;
}

TEST(SamplingPenalties, MinTokensMasksEosAndStopIdsUntilReached) {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {5};
  SequenceSamplingState seq = make_state(p, options({}));
  std::vector<float> masked = kLogits;
  masked[5] = -INFINITY;
  masked[7] = -INFINITY;  // eos
  EXPECT_EQ(processed(seq), masked);
  commit(seq, {1});
  EXPECT_EQ(processed(seq), masked);
  std::vector<int32_t> pending = {2};  // 1 committed + 1 pending = min_tokens
  EXPECT_EQ(processed(seq, pending), kLogits);
  commit(seq, {2});
  EXPECT_EQ(processed(seq), kLogits);

  p.ignore_eos = true;  // eos is then an ordinary token: not masked
  SequenceSamplingState ignoring = make_state(p, options({}));
  masked[7] = kLogits[7];
  EXPECT_EQ(processed(ignoring), masked);
}

TEST(SamplingGreedy, TiesGoToTheLowestIdAndPenaltiesApply) {
  SamplingParams p;
  p.temperature = 0.0;
  std::vector<float> tied = {0.0f, 4.0f, 1.0f, 4.0f, 4.0f};
  StateOptions o;
  o.vocab_size = 5;
  SequenceSamplingState seq = make_state(p, o);
  Sampler sampler(5);
  EXPECT_EQ(sampler.sample({tied, &seq}).token, 1);
  p.presence_penalty = 1.0;  // greedy sees penalties: once 1 is out, 3 wins the tie
  SequenceSamplingState penalised = make_state(p, o);
  int32_t one = 1;
  penalised.append_output(std::span<const int32_t>(&one, 1));
  EXPECT_EQ(sampler.sample({tied, &penalised}).token, 3);
}

TEST(SamplingGreedy, MinTokensSuppressesEosByMaskingItsLogit) {
  SamplingParams p;
  p.temperature = 0.0;
  p.min_tokens = 3;
  std::vector<float> logits = {1.0f, 0.5f, 5.0f, 0.0f};  // eos (2) is the argmax
  StateOptions o;
  o.vocab_size = 4;
  o.eos = {2};
  SequenceSamplingState seq = make_state(p, o);
  Sampler sampler(4);
  std::vector<int32_t> out;
  for (int i = 0; i < 4; ++i) {
    int32_t token = sampler.sample({logits, &seq}).token;
    out.push_back(token);
    seq.append_output(std::span<const int32_t>(&token, 1));
  }
  EXPECT_EQ(out, (std::vector<int32_t>{0, 0, 0, 2}));
}

}  // namespace
}  // namespace beam
