// kernels/cuda/split_grid.h on the host: a row's tiles cut into min(tiles, 64) splits whose sizes
// differ by at most a tile, in order and without gaps, split_of() the inverse of begin(), at every
// length to 140,000 keys from slot 0 and behind a window's unaligned first slot.
#include "kernels/cuda/split_grid.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace beam::cuda::attention_detail {
namespace {

void expect_grid(int64_t lo, int64_t hi) {
  const SplitGrid g = split_grid(lo, hi);
  ASSERT_EQ(g.tile0, lo / 32);
  ASSERT_EQ(g.tiles, hi / 32 - lo / 32 + 1);
  ASSERT_EQ(g.splits, std::min<int64_t>(g.tiles, 64));
  ASSERT_EQ(g.begin(0), g.tile0);
  ASSERT_EQ(g.begin(g.splits), g.tile0 + g.tiles);
  const int64_t small = g.tiles / g.splits;
  for (int64_t i = 0; i < g.splits; ++i) {
    const int64_t size = g.tiles_of(i, i + 1);
    ASSERT_TRUE(size == small || size == small + 1) << lo << ".." << hi << " split " << i;
    for (int64_t t : {g.begin(i), g.begin(i + 1) - 1}) {
      ASSERT_EQ(g.split_of(t), i) << lo << ".." << hi << " tile " << t;
    }
  }
}

TEST(SplitGrid, WholeTilesInAtMost64NearlyEqualSplits) {
  for (int64_t n = 1; n <= 140000; n += n < 5000 ? 1 : 97) {
    SCOPED_TRACE(n);
    expect_grid(0, n - 1);
    expect_grid(1000 + n % 31, 1000 + n % 31 + n - 1);
  }
  expect_grid(0, (int64_t{1} << 31) - 2);  // the largest row: 2^26 tiles
}

TEST(SplitGrid, ShortRowsSplitPerTileLongRowsIn64) {
  EXPECT_EQ(split_grid(0, 2047).splits, 64);  // 64 one-tile splits
  EXPECT_EQ(split_grid(0, 2047).tiles_of(5, 6), 1);
  EXPECT_EQ(split_grid(0, 510).splits, 16);
  EXPECT_EQ(split_grid(20, 531).splits, 17);  // a window's 512 keys over 17 tiles
  const SplitGrid g = split_grid(0, 131090);  // 4,097 tiles: 63 splits of 64, one of 65
  EXPECT_EQ(g.splits, 64);
  EXPECT_EQ(g.tiles_of(0, 63), 63 * 64);
  EXPECT_EQ(g.tiles_of(63, 64), 65);
  EXPECT_EQ(split_grid(0, 2048).tiles_of(0, 64), 65);  // 65 tiles: one split of two
}

}  // namespace
}  // namespace beam::cuda::attention_detail
