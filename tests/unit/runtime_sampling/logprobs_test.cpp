// Logprobs against a direct double-precision log_softmax(logits / T) on a full-size vocabulary;
// they ignore penalties, bias and filters (computed from the raw soft-capped row).
#include "runtime/sampling/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/sampling/sampler.h"
#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::make_state;
using testing::random_softcapped_logits;
using testing::StateOptions;

std::vector<double> log_softmax(const std::vector<float>& logits, double t) {
  double max = *std::max_element(logits.begin(), logits.end()) / t, sum = 0;
  for (float v : logits) sum += std::exp(v / t - max);
  std::vector<double> out;
  for (float v : logits) out.push_back(v / t - max - std::log(sum));
  return out;
}

TEST(SamplingLogprobs, MatchDirectLogSoftmaxOnFullVocabulary) {
  const int64_t vocab = 151936;
  std::vector<float> logits = random_softcapped_logits(vocab, 17, 6.0);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (double temperature : {0.0, 0.7, 1.0, 1.8}) {
    SCOPED_TRACE(temperature);
    auto ref = log_softmax(logits, temperature > 0 ? temperature : 1.0);
    for (int32_t token : {order[0], order[7], order[5000], int32_t{123}, order[vocab - 1]}) {
      TokenLogprobs lp = compute_logprobs(logits, token, temperature, 20);
      EXPECT_EQ(lp.chosen.token, token);
      EXPECT_NEAR(lp.chosen.logprob, ref[token], 2e-5 * std::max(1.0, std::fabs(ref[token])));
      int64_t rank = std::find(order.begin(), order.end(), token) - order.begin() + 1;
      EXPECT_EQ(lp.chosen_rank, rank);
      ASSERT_EQ(lp.top.size(), 20u);
      for (size_t i = 0; i < 20; ++i) {
        EXPECT_EQ(lp.top[i].token, order[i]);
        EXPECT_NEAR(lp.top[i].logprob, ref[order[i]], 2e-5);
      }
    }
  }
}

TEST(SamplingLogprobs, TiesRankByLowerIdAndNoTopWhenZero) {
  std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f};
  TokenLogprobs lp = compute_logprobs(logits, 4, 1.0, 3);
  EXPECT_EQ(lp.chosen_rank, 3);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_EQ(lp.top[1].token, 2);
  EXPECT_EQ(lp.top[2].token, 4);
  EXPECT_EQ(lp.top[0].logprob, lp.top[2].logprob);
  EXPECT_TRUE(compute_logprobs(logits, 0, 1.0, 0).top.empty());
}

TEST(SamplingLogprobs, SamplerReportsRawLogprobsBeforeBiasAndPenalties) {
  const int64_t vocab = 1000;
  std::vector<float> logits = random_softcapped_logits(vocab, 3, 2.0);
  SamplingParams p;
  p.temperature = 0.9;
  p.logprobs = true;
  p.top_logprobs = 5;
  p.logit_bias = {{10, 50.0}};  // makes token 10 the certain choice after processing
  p.repetition_penalty = 1.3;
  p.presence_penalty = 1.0;
  StateOptions o;
  o.vocab_size = vocab;
  SequenceSamplingState seq = make_state(p, o);
  int32_t earlier = 20;
  seq.append_output(std::span<const int32_t>(&earlier, 1));
  Sampler sampler(vocab);
  SampledToken s = sampler.sample({logits, &seq});
  EXPECT_EQ(s.token, 10);
  ASSERT_TRUE(s.logprobs.has_value());
  auto ref = log_softmax(logits, 0.9);
  EXPECT_NEAR(s.logprobs->chosen.logprob, ref[10], 1e-5);
  TokenLogprobs direct = compute_logprobs(logits, 10, 0.9, 5);
  ASSERT_EQ(s.logprobs->top.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(s.logprobs->top[i].token, direct.top[i].token);
    EXPECT_EQ(s.logprobs->top[i].logprob, direct.top[i].logprob);
  }
  // Raw logprobs: the same draw, logprobs at T = 1.
  p.logprobs_mode = LogprobsMode::kRaw;
  SequenceSamplingState raw = make_state(p, o);
  raw.append_output(std::span<const int32_t>(&earlier, 1));
  SampledToken r = sampler.sample({logits, &raw});
  EXPECT_EQ(r.token, 10);
  ASSERT_TRUE(r.logprobs.has_value());
  EXPECT_NEAR(r.logprobs->chosen.logprob, log_softmax(logits, 1.0)[10], 1e-5);
  EXPECT_EQ(r.logprobs->chosen.logprob, compute_logprobs(logits, 10, 1.0, 5).chosen.logprob);

  p.logprobs_mode = LogprobsMode::kScaled;
  p.logprobs = false;
  p.top_logprobs = 0;
  SequenceSamplingState quiet = make_state(p, o);
  EXPECT_FALSE(sampler.sample({logits, &quiet}).logprobs.has_value());
}

// The entropy of softmax(logits / T) against a direct double computation on a full-size
// vocabulary; log V on a flat row, 0 on a one-hot row (every other logit -inf); the sampler
// reports it only when asked, at the logprobs' temperature (T = 1 when greedy or raw).
TEST(SamplingEntropy, MatchesADirectComputationAndItsBounds) {
  const int64_t vocab = 151936;
  const std::vector<float> logits = random_softcapped_logits(vocab, 23, 6.0);
  for (double temperature : {0.0, 0.7, 1.0, 1.8}) {
    SCOPED_TRACE(temperature);
    const std::vector<double> lp = log_softmax(logits, temperature > 0 ? temperature : 1.0);
    double want = 0;
    for (double l : lp) want -= std::exp(l) * l;
    EXPECT_NEAR(distribution_entropy(logits, temperature), want, 1e-5 * want);
  }
  const std::vector<float> flat(1000, 2.5f);
  EXPECT_NEAR(distribution_entropy(flat, 1.0), std::log(1000.0), 1e-6);
  std::vector<float> one_hot(1000, -INFINITY);
  one_hot[17] = 3.0f;
  EXPECT_EQ(distribution_entropy(one_hot, 0.5), 0.0);
}

TEST(SamplingEntropy, SamplerReportsItOnlyWhenAskedAtTheLogprobsTemperature) {
  const int64_t vocab = 5000;
  const std::vector<float> logits = random_softcapped_logits(vocab, 29, 4.0);
  Sampler sampler(vocab);
  for (double temperature : {0.0, 0.6}) {
    SamplingParams p;
    p.temperature = temperature;
    p.return_entropy = true;
    const auto state = testing::state_with_vocab(p, vocab);
    const SampledToken t = sampler.sample(SampleRow{logits, &state});
    ASSERT_TRUE(t.entropy.has_value());
    EXPECT_FALSE(t.logprobs.has_value());
    EXPECT_FLOAT_EQ(*t.entropy, static_cast<float>(distribution_entropy(
                                    logits, state.params().logprob_temperature())));
    p.return_entropy = false;
    const auto plain = testing::state_with_vocab(p, vocab);
    EXPECT_FALSE(sampler.sample(SampleRow{logits, &plain}).entropy.has_value());
  }
}

// token_ids_logprob: the logprobs of given ids equal compute_logprobs' chosen logprob bit for bit
// (the same max, sum and formula); the sampler returns them in the ids' order.
TEST(SamplingTokenIdsLogprob, EqualComputeLogprobsAndComeInOrder) {
  const int64_t vocab = 151936;
  const std::vector<float> logits = random_softcapped_logits(vocab, 31, 6.0);
  const std::vector<int32_t> ids = {5, 151935, 0, 5, 777};
  for (double temperature : {0.0, 0.7}) {
    const std::vector<TokenLogprob> got = logprobs_of(logits, ids, temperature);
    ASSERT_EQ(got.size(), ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      EXPECT_EQ(got[k].token, ids[k]);
      EXPECT_EQ(got[k].logprob, compute_logprobs(logits, ids[k], temperature, 0).chosen.logprob);
    }
  }
  Sampler sampler(vocab);
  SamplingParams p;
  p.temperature = 0.6;
  p.token_ids_logprob = ids;
  const auto state = testing::state_with_vocab(p, vocab);
  const SampledToken t = sampler.sample(SampleRow{logits, &state});
  const std::vector<TokenLogprob> want = logprobs_of(logits, ids, 0.6);
  ASSERT_EQ(t.token_ids_logprobs.size(), ids.size());
  for (size_t k = 0; k < ids.size(); ++k) EXPECT_EQ(t.token_ids_logprobs[k].logprob, want[k].logprob);
  SamplingParams bad = p;
  bad.token_ids_logprob.assign(65, 1);
  EXPECT_NE(bad.validate(vocab).error().message.find("token_ids_logprob"), std::string::npos);
  bad.token_ids_logprob = {static_cast<int32_t>(vocab)};
  EXPECT_NE(bad.validate(vocab).error().message.find("token_ids_logprob"), std::string::npos);
}

}  // namespace
}  // namespace beam
