#include "core/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace beam {

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(to_bf16(1.0f + 1.0f / 256).bits, to_bf16(1.0f).bits);
  // 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even (1 + 2^-6).
  EXPECT_FLOAT_EQ(round_bf16(1.0f + 3.0f / 256), 1.0f + 1.0f / 64);
  EXPECT_FLOAT_EQ(round_bf16(3.14159f), 3.140625f);
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isinf(round_bf16(std::numeric_limits<float>::infinity())));
}

TEST(F16, RoundTripsRepresentableValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(to_float(to_f16(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(to_float(to_f16(70000.0f))));
}

}  // namespace beam
