// The decode planner's item sizes (kernels/cuda/decode_item_sizes.h) at the shapes the H200 runs
// measured: Beam's 8 KV heads on 132 SMs give 16 four-warp slots (4 splits side by side) or 49
// two-warp slots (2) per KV head; tensor-core folds of 4 splits.
#include "kernels/cuda/decode_item_sizes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace beam::cuda::decode_items {
namespace {

constexpr int64_t kFold = 4;
struct Layout {
  int64_t slots, parallel;
};
constexpr Layout kFourWarps{16, 4}, kTwoWarps{49, 2};

// `batch` rows of `keys` keys (32-key splits up to 2,048 keys, then 64 splits).
std::vector<RowSplits> rows_of(int64_t batch, int64_t keys) {
  int64_t split = 32;
  while (split * 64 < keys) split *= 2;
  return std::vector<RowSplits>(static_cast<size_t>(batch), {ceil_div(keys, split), split / 32});
}

int64_t chosen(const std::vector<RowSplits>& rows, Layout l) {
  const std::vector<int64_t> per_item = choose(rows, l.slots, l.parallel, kFold);
  for (int64_t p : per_item) EXPECT_EQ(p, per_item.front()) << "equal rows, equal items";
  return per_item.front();
}

// Batch 1 at 512 keys: four items of one tile a warp (the batch-1 target's plan); batch 8: two
// items a row (whole rows measured 5% slower, run 194); batch 16: whole rows in one wave.
TEST(DecodeItemSizes, SmallBatchesSplitRowsOverIdleSlots) {
  EXPECT_EQ(chosen(rows_of(1, 512), kFourWarps), 4);
  EXPECT_EQ(chosen(rows_of(8, 512), kFourWarps), 8);
  EXPECT_EQ(chosen(rows_of(16, 512), kFourWarps), 16);
  EXPECT_EQ(chosen(rows_of(1, 8192), kFourWarps), 4);  // 16 items, a split a warp
}

// 40 sliding rows on two-warp CTAs: the balanced share would split each row in two (80 items on
// 49 slots, two waves and the combine); whole rows run in one wave (run 192: 2.4 -> 1.8x).
TEST(DecodeItemSizes, LargerItemsWhereHalfRowsMakeASecondWave) {
  EXPECT_EQ(chosen(rows_of(40, 512), kTwoWarps), 16);
  EXPECT_EQ(chosen(rows_of(48, 512), kTwoWarps), 16);
  EXPECT_EQ(chosen(rows_of(128, 512), kTwoWarps), 16);
}

// 8K keys: whole rows leave a short last wave at 40 rows (four-warp: 2.5 waves) and 64 (two-warp:
// 1.3), so rows split in two (run 193: 1.44 -> 1.31x, 1.35 -> 1.20x); from 128 rows whole rows
// (run 195 measured quarter rows at 256 6.5% slower; 160 rows fill 3.3 waves); the same at 32K.
TEST(DecodeItemSizes, SmallerItemsOnlyForAShortLastWave) {
  EXPECT_EQ(chosen(rows_of(40, 8192), kFourWarps), 32);
  EXPECT_EQ(chosen(rows_of(64, 8192), kTwoWarps), 32);
  EXPECT_EQ(chosen(rows_of(128, 8192), kTwoWarps), 64);
  EXPECT_EQ(chosen(rows_of(160, 8192), kTwoWarps), 64);
  EXPECT_EQ(chosen(rows_of(256, 8192), kTwoWarps), 64);
  EXPECT_EQ(chosen(rows_of(256, 32768), kTwoWarps), 64);
}

// Long rows in few items: 6 rows of 128K keys were 3 items a row (18 items on 16 slots, two
// waves); the estimate takes one 2,048-key split a warp (96 items: six even waves; not yet
// measured on the GPU).
TEST(DecodeItemSizes, LongRowsFillTheSlots) {
  EXPECT_EQ(chosen(rows_of(6, 131072), kFourWarps), 4);
  EXPECT_EQ(chosen(rows_of(1, 131072), kFourWarps), 4);
}

// Mixed lengths: every row's items are whole fold groups, at least `parallel` splits, and cover
// the row; a one-split row is one item.
TEST(DecodeItemSizes, ItemsAreWholeFoldGroupsCoveringEachRow) {
  std::vector<RowSplits> rows;
  for (int64_t keys : {1, 33, 512, 513, 2049, 4096, 40000}) rows.push_back(rows_of(1, keys)[0]);
  for (Layout l : {kFourWarps, kTwoWarps}) {
    const std::vector<int64_t> per_item = choose(rows, l.slots, l.parallel, kFold);
    ASSERT_EQ(per_item.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(per_item[i] % kFold, 0) << "row " << i;
      EXPECT_GE(per_item[i], l.parallel) << "row " << i;
      EXPECT_LE(ceil_div(rows[i].splits, per_item[i]), rows[i].splits) << "row " << i;
    }
    EXPECT_GE(per_item[0], rows[0].splits);
  }
}

// The estimate: items longest first, round-robin over the slots; each costs its warps' tiles +
// kItemCost, + kCombineCost when its row is split.
TEST(DecodeItemSizes, SlowestSlotFollowsTheKernelsOrder) {
  const std::vector<RowSplits> rows = {{8, 1}, {4, 2}, {4, 1}};
  // Whole rows: items of 8, 8 and 4 tiles on 2 slots, 4 splits side by side: slot 0 takes the
  // first and the third (2 + 1 + 1 + 1), slot 1 the second (2 tiles a warp + 1).
  EXPECT_EQ(slowest_slot(rows, {8, 4, 4}, 2, 4), 2 + 1 + 1 + 1);
  // Halves of the first row (4 splits each, combined): 4 items of 4 tiles on 2 slots.
  EXPECT_EQ(slowest_slot(rows, {4, 4, 4}, 2, 4), (1 + kItemCost + kCombineCost) + (2 + kItemCost));
  EXPECT_EQ(slowest_slot(rows, {8, 4, 4}, 8, 4), 2 + kItemCost);
}

}  // namespace
}  // namespace beam::cuda::decode_items
