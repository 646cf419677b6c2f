// Allowed-token masks (SampleRow::allowed_tokens): greedy and seeded draws return only allowed
// tokens, logit_bias cannot revive a masked token, logprobs stay the raw model's, a mask of the
// wrong size aborts; vocab 37 (not a multiple of 32) throughout.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "runtime/sampling/sampler.h"
#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::make_state;
using testing::random_softcapped_logits;
using testing::state_with_vocab;
using testing::StateOptions;

constexpr int64_t kAllowedVocab = 37;

std::vector<uint32_t> mask_of(const std::set<int32_t>& allowed, int64_t vocab = kAllowedVocab) {
  std::vector<uint32_t> words(static_cast<size_t>((vocab + 31) / 32), 0u);
  for (int32_t t : allowed) words[static_cast<size_t>(t / 32)] |= 1u << (t % 32);
  return words;
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0;
  return p;
}

// Tokens drawn for `num_draws` consecutive output positions of one sequence under one mask.
std::vector<int32_t> draw_many(const std::vector<float>& logits, const SamplingParams& p,
                               std::span<const uint32_t> mask, uint64_t seed, int num_draws) {
  SequenceSamplingState seq = state_with_vocab(p, kAllowedVocab, seed);
  Sampler sampler(kAllowedVocab);
  std::vector<int32_t> drawn;
  for (int i = 0; i < num_draws; ++i) {
    const int32_t token = sampler.sample({logits, &seq, {}, mask}).token;
    drawn.push_back(token);
    seq.append_output(std::span<const int32_t>(&token, 1));
  }
  return drawn;
}

TEST(SamplingAllowedTokens, GreedyPicksTheBestAllowedToken) {
  std::vector<float> logits(kAllowedVocab, 0.0f);
  logits[5] = 10.0f;  // the best token, disallowed
  logits[20] = 5.0f;
  logits[36] = 7.0f;  // in the last, partial word
  logits[3] = 6.0f;
  SequenceSamplingState seq = state_with_vocab(greedy(), kAllowedVocab, 7);
  Sampler sampler(kAllowedVocab);
  std::vector<uint32_t> mask = mask_of({3, 20, 36});
  EXPECT_EQ(sampler.sample({logits, &seq, {}, mask}).token, 36);
  mask = mask_of({3, 20});
  EXPECT_EQ(sampler.sample({logits, &seq, {}, mask}).token, 3);
  EXPECT_EQ(sampler.sample({logits, &seq}).token, 5);  // no mask: every token
}

TEST(SamplingAllowedTokens, DrawsReturnOnlyAllowedTokens) {
  const std::set<int32_t> allowed = {0, 4, 9, 31, 32, 36};
  const std::vector<uint32_t> mask = mask_of(allowed);
  SamplingParams p;  // temperature 1
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::vector<float> logits =
        random_softcapped_logits(kAllowedVocab, static_cast<uint32_t>(seed), 2.0);
    logits[17] = 20.0f;  // a disallowed token that would take nearly all the mass
    std::set<int32_t> seen;
    for (int32_t t : draw_many(logits, p, mask, seed, 300)) {
      EXPECT_TRUE(allowed.contains(t)) << "seed " << seed << " token " << t;
      seen.insert(t);
    }
    EXPECT_GT(seen.size(), 1u) << "seed " << seed;  // the draw still spreads over allowed tokens
  }
}

TEST(SamplingAllowedTokens, ASingleAllowedTokenIsAlwaysDrawn) {
  const std::vector<float> logits = random_softcapped_logits(kAllowedVocab, 3, 4.0);
  std::vector<SamplingParams> params(3);
  params[1].top_k = 5;
  params[2].top_p = 0.5;
  params[2].min_p = 0.1;
  for (int32_t only : {0, 17, 36}) {
    const std::vector<uint32_t> mask = mask_of({only});
    for (const SamplingParams& p : params)
      for (uint64_t seed = 1; seed <= 4; ++seed)
        for (int32_t t : draw_many(logits, p, mask, seed, 20)) EXPECT_EQ(t, only);
  }
}

TEST(SamplingAllowedTokens, AnAllOnesMaskChangesNothing) {
  const std::vector<float> logits = random_softcapped_logits(kAllowedVocab, 11, 2.0);
  const std::vector<uint32_t> all = {~0u, ~0u};  // padding bits set too
  SamplingParams p;
  p.top_p = 0.9;
  for (uint64_t seed = 1; seed <= 4; ++seed)
    EXPECT_EQ(draw_many(logits, p, all, seed, 50), draw_many(logits, p, {}, seed, 50));
}

TEST(SamplingAllowedTokens, LogitBiasAndPenaltiesDoNotReviveAMaskedToken) {
  std::vector<float> logits(kAllowedVocab, 0.0f);
  logits[2] = 1.0f;
  SamplingParams p = greedy();
  p.logit_bias = {{30, 100.0}};
  p.repetition_penalty = 0.5;  // multiplies the logits of prompt tokens 1..3 (−inf stays −inf)
  p.frequency_penalty = -2.0;
  SequenceSamplingState seq = state_with_vocab(p, kAllowedVocab, 7);
  const int32_t out = 1;
  seq.append_output(std::span<const int32_t>(&out, 1));
  Sampler sampler(kAllowedVocab);
  EXPECT_EQ(sampler.sample({logits, &seq}).token, 30);
  const std::vector<uint32_t> mask = mask_of({2, 5});
  EXPECT_EQ(sampler.sample({logits, &seq, {}, mask}).token, 2);
  p.temperature = 1.0;
  for (int32_t t : draw_many(logits, p, mask_of({5, 6}), 3, 100)) EXPECT_TRUE(t == 5 || t == 6);
}

TEST(SamplingAllowedTokens, LogprobsStayTheRawModelLogSoftmax) {
  const std::vector<float> logits = random_softcapped_logits(kAllowedVocab, 21, 3.0);
  const std::vector<uint32_t> mask = mask_of({1, 8, 33});
  for (double temperature : {0.0, 0.8}) {
    SamplingParams p;
    p.temperature = temperature;
    p.logprobs = true;
    p.top_logprobs = 5;
    SequenceSamplingState seq = state_with_vocab(p, kAllowedVocab, 7);
    Sampler sampler(kAllowedVocab);
    const SampledToken got = sampler.sample({logits, &seq, {}, mask});
    ASSERT_TRUE(got.logprobs.has_value());
    const TokenLogprobs want = compute_logprobs(logits, got.token, temperature, 5);
    const double t = temperature > 0 ? temperature : 1.0;
    double max = -INFINITY, sum = 0.0;
    for (float v : logits) max = std::max(max, static_cast<double>(v));
    for (float v : logits) sum += std::exp((v - max) / t);
    const double raw = (logits[static_cast<size_t>(got.token)] - max) / t - std::log(sum);
    EXPECT_EQ(got.logprobs->chosen.token, got.token);
    EXPECT_EQ(got.logprobs->chosen.logprob, want.chosen.logprob);
    EXPECT_NEAR(got.logprobs->chosen.logprob, raw, 1e-5);
    EXPECT_EQ(got.logprobs->chosen_rank, want.chosen_rank);
    ASSERT_EQ(got.logprobs->top.size(), want.top.size());
    for (size_t j = 0; j < want.top.size(); ++j)  // alternatives include masked tokens
      EXPECT_EQ(got.logprobs->top[j].token, want.top[j].token);
  }
}

TEST(SamplingAllowedTokens, FullVocabularyGreedyAndDraws) {
  const int64_t vocab = 151936;
  const std::vector<float> logits = random_softcapped_logits(vocab, 8, 4.0);
  std::set<int32_t> allowed;
  for (int32_t t = 3; t < vocab; t += 997) allowed.insert(t);
  const std::vector<uint32_t> mask = mask_of(allowed, vocab);
  int32_t best = *allowed.begin();
  for (int32_t t : allowed)
    if (logits[static_cast<size_t>(t)] > logits[static_cast<size_t>(best)]) best = t;
  Sampler sampler(vocab);
  StateOptions o;
  o.vocab_size = vocab;
  SequenceSamplingState g = make_state(greedy(), o);
  EXPECT_EQ(sampler.sample({logits, &g, {}, mask}).token, best);
  SamplingParams p;
  p.top_k = 50;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    o.seed = seed;
    SequenceSamplingState s = make_state(p, o);
    EXPECT_TRUE(allowed.contains(sampler.sample({logits, &s, {}, mask}).token)) << "seed " << seed;
  }
}

TEST(SamplingAllowedTokensDeathTest, AMaskOfTheWrongSizeAborts) {
  const std::vector<float> logits(kAllowedVocab, 0.0f);
  SequenceSamplingState seq = state_with_vocab(greedy(), kAllowedVocab, 7);
  Sampler sampler(kAllowedVocab);
  const std::vector<uint32_t> one_word = {~0u};  // vocab 37 needs 2
  EXPECT_DEATH(sampler.sample({logits, &seq, {}, one_word}), "allowed_tokens words");
}

}  // namespace
}  // namespace beam
