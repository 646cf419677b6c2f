// SamplingRng: Philox4x32-10 known answers (Random123 kat_vectors) and stream independence.
#include "runtime/sampling/sampling_rng.h"

#include "runtime/sampling/sequence_sampling_state.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace beam {
namespace {

TEST(SamplingRng, PhiloxMatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(SamplingRng, UniformIsAPureFunctionOfKeyIndexAndStream) {
  SamplingRng a(42, 0), b(42, 0);
  for (int64_t i = 0; i < 100; ++i) {
    double u = a.uniform(i, RngStream::kTokenDraw);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_EQ(u, b.uniform(i, RngStream::kTokenDraw));
  }
  // Drawing in another order gives the same numbers (nothing is consumed).
  EXPECT_EQ(a.uniform(7, RngStream::kTokenDraw), b.uniform(7, RngStream::kTokenDraw));
}

TEST(SamplingRng, SeedsSiblingsIndicesAndStreamsDiffer) {
  std::set<double> seen;
  for (uint64_t seed : {0ull, 1ull, 42ull, ~0ull})
    for (int64_t sibling : {0, 1, 2})
      for (int64_t index : {int64_t{0}, int64_t{1}, int64_t{1} << 33})
        for (RngStream s : {RngStream::kTokenDraw, RngStream::kSpeculativeAccept,
                            RngStream::kSpeculativeResidual})
          seen.insert(SamplingRng(seed, sibling).uniform(index, s));
  EXPECT_EQ(seen.size(), 4u * 3u * 3u * 3u);
}

TEST(SamplingRng, UniformMomentsLookUniform) {
  SamplingRng rng(7, 3);
  const int n = 200000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    double u = rng.uniform(i, RngStream::kTokenDraw);
    sum += u;
    sum_sq += u * u;
  }
  // Mean 1/2 and second moment 1/3, each within ~6 standard errors.
  EXPECT_NEAR(sum / n, 0.5, 6 * 0.2887 / std::sqrt(n));
  EXPECT_NEAR(sum_sq / n, 1.0 / 3.0, 6 * 0.2981 / std::sqrt(n));
}

TEST(SamplingRng, RandomSeedsDifferAndGivenSeedsAreKept) {
  EXPECT_NE(draw_random_seed(), draw_random_seed());
  SamplingParams p;
  EXPECT_NE(resolve_seed(p), resolve_seed(p));
  p.seed = 77;
  EXPECT_EQ(resolve_seed(p), 77u);
}

}  // namespace
}  // namespace beam
