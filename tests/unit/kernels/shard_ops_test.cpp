// A tensor-parallel rank's ops (kernels/api/shard_ops.h) and moe_experts' unrounded f32 output:
// round_to_bf16 rounds to nearest even like core/bf16.h; sum_ranks_to_bf16 adds ranks in order
// and rounds once; localize_expert_ids keeps a rank's
// experts and drops the rest; experts split over ranks sum (f32) to the whole layer's combine.
#include "kernels/api/shard_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/bf16.h"
#include "kernel_test_util.h"
#include "kernels/api/moe.h"

namespace beam {
namespace {

TEST(RoundToBf16, RoundsToNearestEvenOnEveryShape) {
  test::Contexts cpu;
  std::mt19937 rng(3);
  HostTensor src = test::random_f32({37, 129}, rng, 50.0f);
  // Ties and specials: halfway between two bf16 values (even below, odd below), inf, NaN, -0.
  const float specials[] = {std::bit_cast<float>(0x3f808000u),
                            std::bit_cast<float>(0x3f818000u),
                            std::numeric_limits<float>::infinity(),
                            std::nanf(""),
                            -0.0f,
                            1e-40f};
  std::memcpy(src.view.data, specials, sizeof(specials));
  HostTensor dst(DType::kBF16, {37, 129});
  round_to_bf16(cpu.two, src.view, dst.view);
  for (int64_t i = 0; i < src.view.numel(); ++i) {
    const float s = src.as<float>()[i];
    const bf16 want = to_bf16(s);
    if (std::isnan(s))
      EXPECT_TRUE(std::isnan(to_float(dst.as<bf16>()[i])));
    else
      ASSERT_EQ(dst.as<bf16>()[i].bits, want.bits) << i << ": " << s;
  }
  EXPECT_EQ(dst.as<bf16>()[0].bits, 0x3f80);  // tie to even (down)
  EXPECT_EQ(dst.as<bf16>()[1].bits, 0x3f82);  // tie to even (up)
  EXPECT_DEATH(round_to_bf16(cpu.one, src.view, dst.view.reshape({129, 37})), "round_to_bf16");
}

// The deterministic reduce adds the ranks in order (((p0 + p1) + p2) + p3), as LocalGroup's
// all-reduce, then rounds once; a shape that does not hold the ranks is refused.
TEST(SumRanksToBf16, AddsInRankOrderAndRoundsOnce) {
  test::Contexts cpu;
  HostTensor parts(DType::kF32, {4, 3});
  const float values[] = {1.0f, 1e8f,  0.5f,   // rank 0
                          1e-8f, 1.0f, 0.25f,  // rank 1
                          -1.0f, -1e8f, 0.125f, // rank 2
                          1e-8f, 1.0f, 1.0f};  // rank 3
  std::memcpy(parts.view.data, values, sizeof(values));
  HostTensor dst(DType::kBF16, {3});
  sum_ranks_to_bf16(cpu.two, parts.view, dst.view);
  for (int64_t i = 0; i < 3; ++i) {
    float acc = values[i];
    for (int64_t r = 1; r < 4; ++r) acc += values[r * 3 + i];
    EXPECT_EQ(dst.as<bf16>()[i].bits, to_bf16(acc).bits) << i;
  }
  EXPECT_EQ(to_float(dst.as<bf16>()[1]), 1.0f);  // (1e8 + 1 - 1e8) + 1: the 1 absorbed first
  EXPECT_DEATH(sum_ranks_to_bf16(cpu.one, parts.view.reshape({3, 4}), dst.view),
               "sum_ranks_to_bf16");
}

TEST(LocalizeExpertIds, KeepsTheRanksExpertsAndDropsTheRest) {
  test::Contexts cpu;
  HostTensor ids(DType::kI32, {3, 4}), local(DType::kI32, {3, 4});
  const int32_t in[] = {0, 7, 8, 15, kNoExpert, 9, 12, 11, 16, 4, 5, 8};
  std::memcpy(ids.view.data, in, sizeof(in));
  localize_expert_ids(cpu.one, ids.view, 8, 4, local.view);  // experts [8, 12)
  const int32_t want[] = {kNoExpert, kNoExpert, 0,         kNoExpert, kNoExpert, 1,
                          kNoExpert, 3,         kNoExpert, kNoExpert, kNoExpert, 0};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(local.as<int32_t>()[i], want[i]) << i;
  localize_expert_ids(cpu.one, ids.view, 0, 16, ids.view);  // in place, everything local
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(ids.as<int32_t>()[i], in[i] == 16 ? kNoExpert : in[i]) << i;
}

// The experts of a layer split over `ranks` equal ranges: each range's f32 partial (its local ids
// over its slice of the weights) summed in rank order, then rounded once, against the whole
// layer's bf16 output; the f32 whole-layer output rounds to it exactly.
TEST(MoeExpertsF32, RanksPartialsSumToTheWholeCombine) {
  test::Contexts cpu;
  std::mt19937 rng(5);
  const int64_t T = 23, H = 64, E = 16, I = 32, K = 4;
  HostTensor x = test::random_bf16({T, H}, rng, 1.0f);
  HostTensor gate_up = test::random_bf16({E, 2 * I, H}, rng, 0.1f);
  HostTensor down = test::random_bf16({E, H, I}, rng, 0.1f);
  HostTensor ids(DType::kI32, {T, K}), weights = test::random_f32({T, K}, rng, 0.5f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      ids.as<int32_t>()[t * K + k] = static_cast<int32_t>((t * 5 + k * 3) % E);
  ids.as<int32_t>()[5] = kNoExpert;
  HostTensor whole(DType::kBF16, {T, H}), whole_f32(DType::kF32, {T, H}),
      rounded(DType::kBF16, {T, H});
  moe_experts(cpu.two, x.view, gate_up.view, down.view, ids.view, weights.view, whole.view);
  moe_experts(cpu.two, x.view, gate_up.view, down.view, ids.view, weights.view, whole_f32.view);
  round_to_bf16(cpu.one, whole_f32.view, rounded.view);
  EXPECT_EQ(std::memcmp(rounded.view.data, whole.view.data, whole.view.nbytes()), 0);
  for (int64_t ranks : {2, 4}) {
    const int64_t El = E / ranks;
    HostTensor sum(DType::kF32, {T, H}), local(DType::kI32, {T, K}), part(DType::kF32, {T, H});
    for (int64_t r = 0; r < ranks; ++r) {
      localize_expert_ids(cpu.one, ids.view, r * El, El, local.view);
      moe_experts(cpu.one, x.view, gate_up.view.rows(r * El, El), down.view.rows(r * El, El),
                  local.view, weights.view, part.view);
      for (int64_t i = 0; i < T * H; ++i)
        sum.as<float>()[i] =
            r == 0 ? part.as<float>()[i] : sum.as<float>()[i] + part.as<float>()[i];
    }
    round_to_bf16(cpu.one, sum.view, rounded.view);
    int64_t equal = 0;
    for (int64_t i = 0; i < T * H; ++i) {
      const float got = to_float(rounded.as<bf16>()[i]), want = to_float(whole.as<bf16>()[i]);
      equal += got == want;
      // Another fp32 summation order of the same terms: at most one bf16 rounding apart.
      EXPECT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -7) + 1e-30f)
          << ranks << " ranks, " << i;
    }
    EXPECT_GE(equal, T * H * 99 / 100) << ranks << " ranks";
  }
}

}  // namespace
}  // namespace beam
