// Sampler draws follow the expected distribution: empirical frequencies over many draws against
// the softmax of logits / T (renormalised over the filtered set), with a chi-square bound.
// Seeds are fixed, so each check is deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/sampling/sampler.h"
#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::make_state;
using testing::StateOptions;

// Expected probabilities: softmax(logits / T) restricted to `keep`, in double.
std::vector<double> expected_probs(const std::vector<float>& logits, double temperature,
                                   const std::vector<bool>& keep) {
  std::vector<double> p(logits.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    if (keep[i]) total += p[i] = std::exp(logits[i] / temperature);
  for (double& x : p) x /= total;
  return p;
}

// Pearson chi-square of `num_draws` draws against `probs` (cells with probability 0 must stay
// empty), and the number of degrees of freedom.
std::pair<double, int> chi_square(const std::vector<float>& logits, const SamplingParams& params,
                                  const std::vector<double>& probs, int num_draws) {
  StateOptions o;
  o.vocab_size = static_cast<int64_t>(logits.size());
  o.seed = 20240601;
  SequenceSamplingState seq = make_state(params, o);
  Sampler sampler(o.vocab_size);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < num_draws; ++i) {
    int32_t token = sampler.sample({logits, &seq}).token;
    ++counts[static_cast<size_t>(token)];
    seq.append_output(std::span<const int32_t>(&token, 1));
  }
  double chi2 = 0;
  int cells = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " is outside the allowed set";
      continue;
    }
    double expected = probs[i] * num_draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++cells;
  }
  return {chi2, cells - 1};
}

// Upper bound well past the 99.99% quantile of chi-square with df <= 9 (df 9: 33.7).
constexpr double kChiSquareBound = 35.0;

TEST(SamplingDistribution, PlainTemperatureMatchesSoftmax) {
  std::vector<float> logits = {0.5f, 1.5f, -0.3f, 2.0f, 0.0f, 1.0f, -1.0f, 0.7f, 1.2f, -0.5f};
  for (double t : {1.0, 0.6, 1.7}) {
    SamplingParams p;
    p.temperature = t;
    auto probs = expected_probs(logits, t, std::vector<bool>(logits.size(), true));
    auto [chi2, df] = chi_square(logits, p, probs, 40000);
    EXPECT_EQ(df, 9);
    EXPECT_LT(chi2, kChiSquareBound) << "temperature " << t;
  }
}

TEST(SamplingDistribution, FilteredSetIsRenormalised) {
  std::vector<float> logits = {0.5f, 1.5f, -0.3f, 2.0f, 0.0f, 1.0f, -1.0f, 0.7f, 1.2f, -0.5f};
  SamplingParams p;
  p.temperature = 0.8;
  p.top_k = 4;  // tokens 3, 1, 8, 5
  auto probs = expected_probs(logits, 0.8, {false, true, false, true, false, true, false, false,
                                            true, false});
  auto [chi2, df] = chi_square(logits, p, probs, 40000);
  EXPECT_EQ(df, 3);
  EXPECT_LT(chi2, kChiSquareBound);

  SamplingParams q;
  q.min_p = 0.3;  // weight e^(l - 2) >= 0.3 ⇔ l >= 0.796: tokens 3, 1, 8, 5
  probs = expected_probs(logits, 1.0, {false, true, false, true, false, true, false, false,
                                       true, false});
  std::tie(chi2, df) = chi_square(logits, q, probs, 40000);
  EXPECT_EQ(df, 3);
  EXPECT_LT(chi2, kChiSquareBound);
}

TEST(SamplingDistribution, LargeRowsWithAHeavyHeadAndALightTail) {
  // 64 heavy tokens scattered over 2048 ids, the rest ~3% of the mass in total: draws go through
  // the weighted quickselect on both sides of its first split. Cells: each heavy token, plus
  // one cell for the whole tail.
  const int64_t vocab = 2048;
  std::mt19937 gen(12);
  std::vector<float> logits(vocab, -6.0f);
  std::vector<int32_t> heavy(vocab);
  std::iota(heavy.begin(), heavy.end(), 0);
  std::shuffle(heavy.begin(), heavy.end(), gen);
  heavy.resize(64);
  std::uniform_real_distribution<float> uniform(0.0f, 2.0f);
  for (int32_t t : heavy) logits[t] = uniform(gen);
  SamplingParams p;
  StateOptions o;
  o.vocab_size = vocab;
  o.seed = 5;
  SequenceSamplingState seq = make_state(p, o);
  Sampler sampler(vocab);
  auto probs = expected_probs(logits, 1.0, std::vector<bool>(vocab, true));
  std::vector<double> cell_probs(65, 0.0);
  std::vector<int> cell_of(vocab, 64);
  for (int c = 0; c < 64; ++c) cell_of[heavy[c]] = c;
  for (int64_t t = 0; t < vocab; ++t) cell_probs[cell_of[t]] += probs[t];
  ASSERT_GT(cell_probs[64], 0.02);
  const int num_draws = 30000;
  std::vector<int> counts(65, 0);
  for (int i = 0; i < num_draws; ++i) {
    int32_t token = sampler.sample({logits, &seq}).token;
    ++counts[cell_of[token]];
    seq.append_output(std::span<const int32_t>(&token, 1));
  }
  double chi2 = 0;
  for (int c = 0; c < 65; ++c) {
    double expected = cell_probs[c] * num_draws;
    chi2 += (counts[c] - expected) * (counts[c] - expected) / expected;
  }
  EXPECT_LT(chi2, 120.0);  // df 64: mean 64, sd 11.3; 120 is past the 99.99% quantile
}

TEST(SamplingDistribution, ChiSquareDetectsAWrongDistribution) {
  // The same draws judged against the T = 1 softmax when they were made at T = 0.5: the test
  // statistic must be far above the bound, so the bound above really discriminates.
  std::vector<float> logits = {0.5f, 1.5f, -0.3f, 2.0f, 0.0f, 1.0f};
  SamplingParams p;
  p.temperature = 0.5;
  auto wrong = expected_probs(logits, 1.0, std::vector<bool>(logits.size(), true));
  auto [chi2, df] = chi_square(logits, p, wrong, 40000);
  EXPECT_GT(chi2, 10 * kChiSquareBound);
}

}  // namespace
}  // namespace beam
