// Selection primitives against brute force: top-k (both the heap and the nth_element paths),
// selection by mass in rank order (both bounds, ties, zero weights), the weights and the
// vectorized vocabulary passes (whose block and tail paths must agree with plain loops).
#include "runtime/sampling/token_candidate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "runtime/sampling/fast_exp.h"
#include "runtime/sampling/vocab_passes.h"

namespace beam {
namespace {

std::vector<TokenCandidate> random_candidates(int64_t n, uint32_t seed, int distinct_values) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> pick(0, distinct_values - 1);
  std::vector<TokenCandidate> c;
  for (int64_t i = 0; i < n; ++i)  // few distinct values: many ties
    c.push_back({std::pow(0.9f, static_cast<float>(pick(gen))), static_cast<int32_t>(i)});
  std::shuffle(c.begin(), c.end(), gen);
  return c;
}

std::vector<TokenCandidate> rank_sorted(std::vector<TokenCandidate> c) {
  std::sort(c.begin(), c.end(), ranks_before);
  return c;
}

TEST(SamplingSelection, TopKKeepsExactlyTheKFirstRanked) {
  for (int64_t n : {10, 1000, 20000}) {
    for (int64_t k : {1, 3, 17, 200, 5000}) {
      if (k > n) continue;
      auto c = random_candidates(n, static_cast<uint32_t>(n + k), 40);
      auto want = rank_sorted(c);
      ASSERT_EQ(keep_top_k(c, k), k);
      std::set<int32_t> got_ids, want_ids;
      for (int64_t i = 0; i < k; ++i) {
        got_ids.insert(c[i].id);
        want_ids.insert(want[i].id);
      }
      EXPECT_EQ(got_ids, want_ids) << "n " << n << " k " << k;
    }
  }
}

TEST(SamplingSelection, SelectByMassFindsTheCrossingToken) {
  std::mt19937 gen(3);
  for (int64_t n : {1, 5, 40, 3000, 50000}) {
    for (int trial = 0; trial < 12; ++trial) {
      auto c = random_candidates(n, static_cast<uint32_t>(n * 31 + trial), trial % 2 ? 5 : 300);
      if (n > 1 && trial % 3 == 0) c[0].value = 0.0f;  // a zero weight is never selected
      auto sorted = rank_sorted(c);
      double total = 0;
      for (const auto& x : sorted) total += x.value;
      double fraction = std::uniform_real_distribution<double>(0.0, 1.0)(gen);
      for (MassBound bound : {MassBound::kAtLeast, MassBound::kAbove}) {
        double target = bound == MassBound::kAtLeast ? std::max(fraction, 1e-9) * total
                                                     : fraction * total;
        // Brute force: walk the fully sorted order.
        int64_t want = 0;
        double cum = 0;
        while (want < n) {
          cum += sorted[want++].value;
          if (bound == MassBound::kAtLeast ? cum >= target : cum > target) break;
        }
        auto work = c;
        RankedPrefix got = select_by_mass(work, target, bound);
        SCOPED_TRACE(::testing::Message() << "n " << n << " trial " << trial);
        ASSERT_EQ(got.count, want);
        EXPECT_EQ(work[got.count - 1].id, sorted[want - 1].id);
        EXPECT_GT(work[got.count - 1].value, 0.0f);
        std::set<int32_t> got_ids, want_ids;
        for (int64_t i = 0; i < want; ++i) {
          got_ids.insert(work[i].id);
          want_ids.insert(sorted[i].id);
        }
        EXPECT_EQ(got_ids, want_ids);
        EXPECT_NEAR(got.mass, cum, 1e-9 * total);
      }
    }
  }
}

TEST(SamplingSelection, TargetOutOfReachTakesEverythingEndingWithTheLastPositive) {
  std::vector<TokenCandidate> c = {{0.5f, 0}, {0.0f, 1}, {1.0f, 2}, {0.25f, 3}, {0.0f, 4}};
  RankedPrefix got = select_by_mass(c, 10.0, MassBound::kAtLeast);
  EXPECT_EQ(got.count, 5);
  EXPECT_EQ(c[4].id, 3);
  EXPECT_DOUBLE_EQ(got.mass, 1.75);
}

TEST(SamplingSelection, WeightsAreExpOfScaledLogitGaps) {
  std::vector<TokenCandidate> c = {{1.0f, 0}, {3.0f, 1}, {-2.0f, 2}, {-INFINITY, 3}, {2.5f, 4}};
  double total = to_weights(c, 0.5);
  double want_total = 0;
  for (auto [logit, id] : {std::pair{1.0, 0}, {3.0, 1}, {-2.0, 2}, {2.5, 4}}) {
    double w = std::exp((logit - 3.0) / 0.5);
    EXPECT_NEAR(c[id].value, w, 1e-6 * w);
    want_total += w;
  }
  EXPECT_EQ(c[1].value, 1.0f);
  EXPECT_EQ(c[3].value, 0.0f);
  EXPECT_NEAR(total, want_total, 1e-6);
  std::vector<TokenCandidate> cold = {{1.0f, 0}, {1.0001f, 1}};
  to_weights(cold, 1e-30);  // tiny temperature: only the best keeps a weight, no NaN
  EXPECT_EQ(cold[0].value, 0.0f);
  EXPECT_EQ(cold[1].value, 1.0f);
}

TEST(SamplingSelection, FastExpIsAccurateAndFlushesTinyResults) {
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.00173f) {
    double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(exp_nonpositive(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-88.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-INFINITY), 0.0f);
  EXPECT_EQ(exp_nonpositive(NAN), 0.0f);
}

TEST(SamplingSelection, VocabPassesMatchPlainLoopsForEveryTailLength) {
  std::mt19937 gen(9);
  std::normal_distribution<float> normal(0.0f, 5.0f);
  for (size_t n : {1, 7, 8, 9, 63, 64, 1001}) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(gen);
    v[n / 2] = NAN;  // skipped by max, weight 0
    float want_max = -INFINITY;
    for (float x : v)
      if (x > want_max) want_max = x;
    ASSERT_EQ(max_value(v), want_max) << n;
    std::vector<TokenCandidate> c;
    for (size_t i = 0; i < n; ++i) c.push_back({v[i], static_cast<int32_t>(i)});
    ASSERT_EQ(max_value(std::span<const TokenCandidate>(c)), want_max);
    // Plain loop in the documented order: lane i % 8, lanes summed 0..7.
    double lanes[8] = {};
    for (size_t i = 0; i < n; ++i) lanes[i % 8] += exp_nonpositive((v[i] - want_max) * 0.7f);
    double want_sum = 0;
    for (double l : lanes) want_sum += l;
    EXPECT_EQ(sum_exp(v, want_max, 0.7f), want_sum) << n;
    EXPECT_EQ(exp_weights_in_place(c, want_max, 0.7f), want_sum) << n;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(c[i].id, static_cast<int32_t>(i));
      EXPECT_EQ(c[i].value, exp_nonpositive((v[i] - want_max) * 0.7f));
    }
  }
}

}  // namespace
}  // namespace beam
