// RateWindow: the rate over the newest span of samples, 0 when idle or unmeasurable.
#include "runtime/rate_window.h"

#include <gtest/gtest.h>

namespace beam {
namespace {

TEST(RateWindow, NeedsTwoSamples) {
  RateWindow w(5);
  EXPECT_EQ(w.rate(0), 0);
  w.add(1.0, 100);
  EXPECT_EQ(w.rate(1.0), 0);
  w.add(1.0, 120);  // no time between them: no rate
  EXPECT_EQ(w.rate(1.0), 0);
}

TEST(RateWindow, RateOverTheSamplesWithinTheSpan) {
  RateWindow w(5);
  w.add(0.0, 0);
  w.add(1.0, 10);
  w.add(2.0, 30);
  EXPECT_DOUBLE_EQ(w.rate(2.0), 15.0);  // 30 tokens in 2 s
  // A burst after an idle spell: the samples before it leave the span and do not dilute it.
  w.add(100.0, 30);
  w.add(101.0, 130);
  EXPECT_DOUBLE_EQ(w.rate(101.0), 100.0);
  w.add(104.0, 430);
  w.add(105.0, 530);  // 100 is still within 5 s of it: 500 tokens in 5 s
  EXPECT_DOUBLE_EQ(w.rate(105.0), 100.0);
  w.add(106.5, 580);  // 100 and 101 have left the span: (580 - 430) / (106.5 - 104)
  EXPECT_DOUBLE_EQ(w.rate(106.5), 60.0);
}

TEST(RateWindow, ZeroOnceTheNewestSampleIsOlderThanTheSpan) {
  RateWindow w(5);
  w.add(0.0, 0);
  w.add(1.0, 50);
  EXPECT_DOUBLE_EQ(w.rate(5.9), 50.0);
  EXPECT_EQ(w.rate(6.1), 0);
}

}  // namespace
}  // namespace beam
