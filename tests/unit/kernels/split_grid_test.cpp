// kernels/cuda/split_grid.h on the host: the split size is the smallest multiple of 32 keys that
// cuts a row into at most 64 splits, 32 keys up to 2,048, and 57 splits or more from 16K keys (a
// warp each on a KV head's 66 warps at batch 1 on an H200), at every length to 300,000 keys.
#include "kernels/cuda/split_grid.h"

#include <gtest/gtest.h>

namespace beam::cuda::attention_detail {
namespace {

int64_t splits_of(int64_t n, int64_t size) {
  return (n + size - 1) / size;
}

TEST(SplitGrid, SmallestTileMultipleWithAtMost64Splits) {
  int64_t previous = kMinSplitKeys;
  for (int64_t n = 1; n <= 300000; ++n) {
    const int64_t size = split_keys(n);
    ASSERT_EQ(size % kMinSplitKeys, 0) << n;
    ASSERT_LE(splits_of(n, size), kMaxSplits) << n;
    if (size > kMinSplitKeys) {
      ASSERT_GT(splits_of(n, size - kMinSplitKeys), kMaxSplits) << n << ": a smaller size fits";
    }
    ASSERT_GE(size, previous) << n << ": the size shrank";
    if (n <= 2048) {
      ASSERT_EQ(size, kMinSplitKeys) << n;
    }
    if (n >= 16384) {
      ASSERT_GE(splits_of(n, size), 57) << n;
    }
    previous = size;
  }
}

TEST(SplitGrid, StepsAndALongRow) {
  EXPECT_EQ(split_keys(2048), 32);
  EXPECT_EQ(split_keys(2049), 64);
  EXPECT_EQ(split_keys(4096), 64);
  EXPECT_EQ(split_keys(4097), 96);
  EXPECT_EQ(split_keys(5000), 96);    // 53 splits, the last of 8 keys
  EXPECT_EQ(split_keys(40000), 640);  // 63 splits, the last of 320 keys
  EXPECT_EQ(split_keys(131072), 2048);
  EXPECT_EQ(split_keys(131091), 2080);  // 64 splits (a power of two: 33 of 4,096)
}

}  // namespace
}  // namespace beam::cuda::attention_detail
