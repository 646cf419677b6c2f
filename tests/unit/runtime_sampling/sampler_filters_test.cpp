// Sampler filters: top-k, top-p and min-p draw only from the set their definitions allow, on
// hand-built rows (allowed set known) and on a full-size vocabulary (allowed set computed here).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "runtime/sampling/sampler.h"
#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::logits_from_probs;
using testing::make_state;
using testing::StateOptions;

// Every token drawn for `num_draws` consecutive output positions of one sequence.
std::multiset<int32_t> draw_many(const std::vector<float>& logits, const SamplingParams& params,
                                 int num_draws, uint64_t seed = 99) {
  StateOptions o;
  o.vocab_size = static_cast<int64_t>(logits.size());
  o.seed = seed;
  SequenceSamplingState seq = make_state(params, o);
  Sampler sampler(o.vocab_size);
  std::multiset<int32_t> drawn;
  for (int i = 0; i < num_draws; ++i) {
    int32_t token = sampler.sample({logits, &seq}).token;
    drawn.insert(token);
    seq.append_output(std::span<const int32_t>(&token, 1));
  }
  return drawn;
}

std::set<int32_t> distinct(const std::multiset<int32_t>& m) { return {m.begin(), m.end()}; }

TEST(SamplingFilters, TopKDrawsOnlyTheKBest) {
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.5f, 3.0f, 0.0f, 1.0f, -3.0f};
  SamplingParams p;
  p.top_k = 3;
  p.temperature = 1.5;
  EXPECT_EQ(distinct(draw_many(logits, p, 3000)), (std::set<int32_t>{4, 1, 3}));
  p.top_k = 1;
  EXPECT_EQ(distinct(draw_many(logits, p, 200)), (std::set<int32_t>{4}));
}

TEST(SamplingFilters, TopKTieAtTheBoundaryKeepsTheLowerId) {
  std::vector<float> logits = {0.0f, 1.0f, 0.5f, 2.0f, 0.5f, 0.5f};
  SamplingParams p;
  p.top_k = 3;  // 3 (2.0), 1 (1.0), then the tie 2/4/5 (0.5) → 2
  EXPECT_EQ(distinct(draw_many(logits, p, 2000)), (std::set<int32_t>{1, 2, 3}));
}

TEST(SamplingFilters, TopPKeepsTheSmallestPrefixReachingP) {
  std::vector<float> logits = logits_from_probs({0.05, 0.5, 0.15, 0.3});
  SamplingParams p;
  p.top_p = 0.75;  // 0.5, 0.8 → {1, 3}
  EXPECT_EQ(distinct(draw_many(logits, p, 3000)), (std::set<int32_t>{1, 3}));
  p.top_p = 0.85;  // 0.5, 0.8, 0.95 → {1, 3, 2}
  EXPECT_EQ(distinct(draw_many(logits, p, 3000)), (std::set<int32_t>{1, 2, 3}));
  p.top_p = 0.3;  // the best token alone
  EXPECT_EQ(distinct(draw_many(logits, p, 200)), (std::set<int32_t>{1}));
}

TEST(SamplingFilters, TopPIsAppliedAfterTemperature) {
  std::vector<float> logits = logits_from_probs({0.6, 0.3, 0.1});
  SamplingParams p;
  p.top_p = 0.85;  // T = 1: 0.6, 0.9 → {0, 1}
  EXPECT_EQ(distinct(draw_many(logits, p, 2000)), (std::set<int32_t>{0, 1}));
  p.temperature = 3.0;  // flatter: 0.427, 0.339, 0.235 → cumulative 0.427, 0.765 → all three
  EXPECT_EQ(distinct(draw_many(logits, p, 2000)), (std::set<int32_t>{0, 1, 2}));
}

TEST(SamplingFilters, TopPRenormalisesOverTheTopKSet) {
  std::vector<float> logits = logits_from_probs({0.4, 0.3, 0.2, 0.1});
  SamplingParams p;
  p.top_p = 0.72;  // alone: 0.4, 0.7, 0.9 → {0, 1, 2}
  EXPECT_EQ(distinct(draw_many(logits, p, 3000)), (std::set<int32_t>{0, 1, 2}));
  p.top_k = 3;  // renormalised 4/9, 7/9 → {0, 1}
  EXPECT_EQ(distinct(draw_many(logits, p, 3000)), (std::set<int32_t>{0, 1}));
}

TEST(SamplingFilters, MinPKeepsTokensAtLeastMinPTimesTheBest) {
  std::vector<float> logits = logits_from_probs({0.1, 0.4, 0.2, 0.3});
  SamplingParams p;
  p.min_p = 0.45;  // threshold 0.18 → {1, 3, 2}
  EXPECT_EQ(distinct(draw_many(logits, p, 3000)), (std::set<int32_t>{1, 2, 3}));
  p.min_p = 0.6;  // threshold 0.24 → {1, 3}
  EXPECT_EQ(distinct(draw_many(logits, p, 3000)), (std::set<int32_t>{1, 3}));
  p.min_p = 1.0;  // only the best
  EXPECT_EQ(distinct(draw_many(logits, p, 200)), (std::set<int32_t>{1}));
  p.min_p = 0.6;
  p.top_p = 0.5;  // top-p first keeps {1, 3}; min-p keeps both
  EXPECT_EQ(distinct(draw_many(logits, p, 3000)), (std::set<int32_t>{1, 3}));
}

// On a full-size vocabulary the allowed set is computed here with a full sort in double.
std::set<int32_t> allowed_set(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  if (p.top_k > 0) order.resize(static_cast<size_t>(p.top_k));
  std::vector<double> w;
  for (int32_t t : order) w.push_back(std::exp((logits[t] - logits[order[0]]) / p.temperature));
  double total = std::accumulate(w.begin(), w.end(), 0.0), cum = 0;
  std::set<int32_t> allowed;
  for (size_t i = 0; i < order.size(); ++i) {
    if (w[i] >= p.min_p) allowed.insert(order[i]);
    cum += w[i];
    if (cum >= p.top_p * total) break;
  }
  return allowed;
}

TEST(SamplingFilters, FullVocabularyDrawsStayInTheAllowedSet) {
  const int64_t vocab = 151936;
  std::vector<float> logits = testing::random_softcapped_logits(vocab, 5, 4.0);
  struct Case {
    int64_t top_k;
    double top_p, min_p, temperature;
  };
  for (Case c : {Case{0, 0.9, 0.0, 0.7}, Case{50, 0.95, 0.0, 1.0}, Case{0, 1.0, 0.02, 0.8},
                 Case{0, 0.99, 0.05, 1.2}}) {
    SamplingParams p;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.temperature = c.temperature;
    std::set<int32_t> allowed = allowed_set(logits, p);
    ASSERT_GT(allowed.size(), 3u);  // the case really filters something and keeps a few
    ASSERT_LT(allowed.size(), static_cast<size_t>(vocab));
    std::set<int32_t> drawn = distinct(draw_many(logits, p, 150));
    for (int32_t t : drawn) EXPECT_TRUE(allowed.contains(t)) << "token " << t;
    EXPECT_GT(drawn.size(), 1u);
  }
}

}  // namespace
}  // namespace beam
