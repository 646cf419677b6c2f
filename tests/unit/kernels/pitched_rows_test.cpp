// copy_rows / zero_rows on the host: each row lands at its pitch, the bytes between rows keep
// theirs, and mismatched shapes are refused. (The CUDA side runs under LoraSlots on the GPU.)
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/api/device_memory.h"

namespace beam {
namespace {

// Three rows of 4 bytes: a contiguous source into every other 4-byte row of a 24-byte stack.
TEST(PitchedRows, CopyPlacesEachRowAtItsPitchAndLeavesTheGapsAlone) {
  KernelContext ctx;
  std::vector<uint8_t> src(12), dst(24, 0xee);
  std::iota(src.begin(), src.end(), uint8_t{1});
  copy_rows(ctx, PitchedRows{dst.data() + 4, Device::kCpu, 8, 4, 3},
            PitchedRows{src.data(), Device::kCpu, 4, 4, 3});
  const std::vector<uint8_t> want = {0xee, 0xee, 0xee, 0xee, 1, 2,  3,  4,
                                     0xee, 0xee, 0xee, 0xee, 5, 6,  7,  8,
                                     0xee, 0xee, 0xee, 0xee, 9, 10, 11, 12};
  EXPECT_EQ(dst, want);
}

TEST(PitchedRows, ZeroClearsOnlyTheRows) {
  KernelContext ctx;
  std::vector<uint8_t> t(12, 7);
  zero_rows(ctx, PitchedRows{t.data(), Device::kCpu, 6, 2, 2});
  const std::vector<uint8_t> want = {0, 0, 7, 7, 7, 7, 0, 0, 7, 7, 7, 7};
  EXPECT_EQ(t, want);
}

TEST(PitchedRows, EmptyRegionsAreNoOps) {
  KernelContext ctx;
  std::vector<uint8_t> t(4, 3);
  copy_rows(ctx, PitchedRows{t.data(), Device::kCpu, 4, 4, 0},
            PitchedRows{nullptr, Device::kCpu, 4, 4, 0});
  zero_rows(ctx, PitchedRows{t.data(), Device::kCpu, 4, 0, 1});
  EXPECT_EQ(t, std::vector<uint8_t>(4, 3));
}

TEST(PitchedRowsDeathTest, MismatchedRowsAndShortPitchesAreRefused) {
  KernelContext ctx;
  std::vector<uint8_t> a(16), b(16);
  EXPECT_DEATH(copy_rows(ctx, PitchedRows{a.data(), Device::kCpu, 4, 4, 2},
                         PitchedRows{b.data(), Device::kCpu, 4, 4, 3}),
               "copy_rows");
  EXPECT_DEATH(zero_rows(ctx, PitchedRows{a.data(), Device::kCpu, 2, 4, 2}), "pitch 2");
}

}  // namespace
}  // namespace beam
