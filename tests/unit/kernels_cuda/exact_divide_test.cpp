// kernels/cuda/exact_divide.cuh on the host (the device code's formulas): within the domain
// reciprocal_exact states, divide_by_reciprocal is bit-identical to the correctly rounded a / b;
// the prefill attention relies on it for out = bf16(o / l).
#include "kernels/cuda/exact_divide.cuh"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>

namespace beam {
namespace {

// a / b through the reciprocal path (in the domain or not).
float via_reciprocal(float a, float b) {
  return exact_divide::divide_by_reciprocal(a, b, exact_divide::reciprocal_rn(b));
}

// Whether the single pair (a, b) lies in reciprocal_exact's domain.
bool in_domain(float a, float b) {
  return exact_divide::reciprocal_exact(std::fabs(a), std::fabs(a), b);
}

TEST(ExactDivide, RandomDomainBitIdenticalToDivision) {
  std::mt19937 gen(7);
  auto rng = [&gen] { return static_cast<uint32_t>(gen()); };
  int64_t checked = 0, differ = 0;
  while (checked < 20'000'000) {
    // b in [1, 2^40), a of any sign and exponent: keep the pairs in the stated domain.
    const float b = std::bit_cast<float>(((127u + rng() % 40u) << 23) | (rng() & 0x7fffffu));
    const float a = std::bit_cast<float>((rng() & 0x807fffffu) | ((rng() % 255u) << 23));
    if (!in_domain(a, b)) continue;
    const float got = via_reciprocal(a, b);
    const float want = a / b;
    if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want) && ++differ <= 5)
      ADD_FAILURE() << std::hexfloat << a << " / " << b << ": " << got << ", want " << want;
    ++checked;
  }
  EXPECT_EQ(differ, 0);
}

TEST(ExactDivide, DomainEdgesBitIdenticalToDivision) {
  const float divisors[] = {1.0f,           std::nextafter(1.0f, 2.0f),
                            3.0f,           7.0f,
                            1.5f,           0x1.fffffep+0f,
                            1000.0f,        0x1p+24f,
                            0x1.fffffep+39f};
  for (const float b : divisors) {
    const float lowest = 0x1p-100f * b;  // the smallest |a| the domain admits
    const float dividends[] = {lowest,  std::nextafter(lowest, 1.0f), 1.0f,
                               b,       std::nextafter(b, 0.0f),      0x1.fffffep+100f,
                               FLT_MAX, std::nextafter(FLT_MAX, 0.0f)};
    for (const float a : dividends) {
      for (const float s : {a, -a}) {
        EXPECT_TRUE(in_domain(s, b)) << std::hexfloat << s << " / " << b;
        EXPECT_EQ(std::bit_cast<uint32_t>(via_reciprocal(s, b)), std::bit_cast<uint32_t>(s / b))
            << std::hexfloat << s << " / " << b;
      }
    }
  }
}

TEST(ExactDivide, DomainExcludesWhatTheReciprocalGetsWrong) {
  // Quotients below 2^-100 (the residual is inexact near the subnormals) and infinite dividends
  // (inf - inf in the residual) are outside: callers divide those with a / b.
  EXPECT_FALSE(exact_divide::reciprocal_exact(0.0f, 1.0f, 1.0f));
  EXPECT_FALSE(exact_divide::reciprocal_exact(0x1p-127f, 1.0f, 1.0f));
  EXPECT_FALSE(exact_divide::reciprocal_exact(0x1p-90f, 1.0f, 0x1p+20f));
  EXPECT_FALSE(exact_divide::reciprocal_exact(1.0f, INFINITY, 1.0f));
  EXPECT_TRUE(exact_divide::reciprocal_exact(0x1p-80f, 1.0f, 0x1p+20f));
  // What goes wrong outside: a quotient near the subnormals misses the correctly rounded one by an
  // ulp, and an infinite dividend gives NaN.
  const float a = 0x1.d2fb9p-129f, b = 0x1.1578e6p+0f;
  EXPECT_NE(std::bit_cast<uint32_t>(via_reciprocal(a, b)), std::bit_cast<uint32_t>(a / b));
  EXPECT_TRUE(std::isnan(via_reciprocal(INFINITY, 3.0f)));
}

}  // namespace
}  // namespace beam
