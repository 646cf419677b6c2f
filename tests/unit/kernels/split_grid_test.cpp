// kernels/cuda/split_grid.h on the host: up to 65,536 keys a row's splits are the aligned grid of
// the smallest power-of-two size giving at most 64 splits (interior splits whole, the first and
// last possibly partial), longer rows exactly 64 balanced splits (sizes differing by at most a
// tile); in both, splits cover the row's tiles in order without gaps and split_of() inverts
// begin(), from slot 0 and behind an unaligned first slot, at every length to 140,000 keys.
#include "kernels/cuda/split_grid.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace beam::cuda::attention_detail {
namespace {

void expect_grid(int64_t lo, int64_t hi) {
  const SplitGrid g = split_grid(lo, hi);
  const int64_t n = hi - lo + 1;
  ASSERT_EQ(g.tile0, lo / 32);
  ASSERT_EQ(g.tiles, hi / 32 - lo / 32 + 1);
  ASSERT_EQ(g.begin(0), g.tile0);
  ASSERT_EQ(g.begin(g.splits), g.tile0 + g.tiles);
  if (n > kBalancedKeys) {
    ASSERT_EQ(g.size, 0);
    ASSERT_EQ(g.splits, 64);
  } else {
    ASSERT_GT(g.size, 0);
    ASSERT_EQ(g.size & (g.size - 1), 0) << "a power of two";
    ASSERT_GE(g.size * 32 * 64, n) << "at most 64 splits of n keys";
    if (g.size > 1) {
      ASSERT_LT(g.size / 2 * 32 * 64, n) << "the smallest such size";
    }
    ASSERT_LE(g.splits, 65);
  }
  const int64_t shorter = g.tiles / g.splits;
  for (int64_t i = 0; i < g.splits; ++i) {
    const int64_t size = g.tiles_of(i, i + 1);
    ASSERT_GE(size, 1) << lo << ".." << hi << " split " << i;
    if (g.size == 0) {
      ASSERT_TRUE(size == shorter || size == shorter + 1) << lo << ".." << hi << " split " << i;
    } else if (i > 0 && i < g.splits - 1) {
      ASSERT_EQ(size, g.size) << lo << ".." << hi << " split " << i;
      ASSERT_EQ(g.begin(i) % g.size, 0) << "on the slot grid";
    }
    for (int64_t t : {g.begin(i), g.begin(i + 1) - 1}) {
      ASSERT_EQ(g.split_of(t), i) << lo << ".." << hi << " tile " << t;
      ASSERT_EQ(g.ends_split(t), t == g.begin(i + 1) - 1) << lo << ".." << hi << " tile " << t;
    }
  }
  ASSERT_FALSE(g.ends_split(g.tile0 - 1)) << "before the row";
  ASSERT_FALSE(g.ends_split(g.tile0 + g.tiles)) << "after the row";
}

TEST(SplitGrid, SplitsCoverTheRowInOrder) {
  for (int64_t n = 1; n <= 140000; n += n < 5000 ? 1 : 97) {
    SCOPED_TRACE(n);
    expect_grid(0, n - 1);
    expect_grid(1000 + n % 31, 1000 + n % 31 + n - 1);
  }
  for (int64_t n : {kBalancedKeys - 1, kBalancedKeys, kBalancedKeys + 1}) expect_grid(19, 18 + n);
  expect_grid(0, (int64_t{1} << 31) - 2);  // the largest row: 2^26 tiles
}

TEST(SplitGrid, AlignedUpTo64KKeysBalancedBeyond) {
  EXPECT_EQ(split_grid(0, 2047).splits, 64);  // 64 one-tile splits
  EXPECT_EQ(split_grid(0, 2047).size, 1);
  EXPECT_EQ(split_grid(20, 531).splits, 17);  // a window's 512 keys over 17 tiles
  const SplitGrid k8 = split_grid(0, 8199);   // 257 tiles: 32 splits of 8, then one of 1
  EXPECT_EQ(k8.splits, 33);
  EXPECT_EQ(k8.tiles_of(32, 33), 1);
  const SplitGrid k64 = split_grid(19, 19 + kBalancedKeys - 1);  // 65 splits of 32, straddling
  EXPECT_EQ(k64.size, 32);
  EXPECT_EQ(k64.splits, 65);
  const SplitGrid k128 = split_grid(0, 131090);  // 4,097 tiles: 63 splits of 64, one of 65
  EXPECT_EQ(k128.size, 0);
  EXPECT_EQ(k128.splits, 64);
  EXPECT_EQ(k128.tiles_of(0, 63), 63 * 64);
  EXPECT_EQ(k128.tiles_of(63, 64), 65);
}

}  // namespace
}  // namespace beam::cuda::attention_detail
