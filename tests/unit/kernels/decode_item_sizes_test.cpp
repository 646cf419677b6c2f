// The decode planner's item sizes (kernels/cuda/decode_item_sizes.h) at the shapes the H200 runs
// measured: Beam's 8 KV heads on 132 SMs give 16 four-warp slots (4 splits side by side) or 49
// two-warp slots (2) per KV head, whose waves speed up when part full (kHbmBoundWaves);
// tensor-core folds of 4 splits.
#include "kernels/cuda/decode_item_sizes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace beam::cuda::decode_items {
namespace {

constexpr int64_t kFold = 4;
struct Layout {
  int64_t slots, parallel;
  WaveSpeed speed;
};
constexpr Layout kFourWarps{16, 4, kOneSpeed}, kTwoWarps{49, 2, kHbmBoundWaves};

// `batch` rows of `keys` keys from slot 0 (split_grid.h).
std::vector<SplitGrid> rows_of(int64_t batch, int64_t keys) {
  return std::vector<SplitGrid>(static_cast<size_t>(batch),
                                attention_detail::split_grid(0, keys - 1));
}

// Splits per item chosen for `batch` equal rows of `keys` keys.
int64_t chosen(int64_t batch, int64_t keys, Layout l) {
  const std::vector<int64_t> per_item =
      choose(rows_of(batch, keys), l.slots, l.parallel, kFold, l.speed);
  for (int64_t p : per_item) EXPECT_EQ(p, per_item.front()) << "equal rows, equal items";
  return per_item.front();
}

struct Choice {
  int64_t batch, keys;
  Layout layout;
  int64_t splits_per_item;
  const char* why;
};
constexpr Choice kChoices[] = {
    // Small batches split rows over idle slots.
    {1, 512, kFourWarps, 4, "batch 1: four items of one tile a warp (the batch-1 target's plan)"},
    {8, 512, kFourWarps, 8, "batch 8: two items a row (whole rows 5% slower, run 194)"},
    {16, 512, kFourWarps, 16, "batch 16: whole rows in one wave"},
    {1, 8192, kFourWarps, 4, "batch 1 at 8K keys: 16 items, a 128-key split a warp"},
    // Larger items where halves of rows would make a second wave.
    {40, 512, kTwoWarps, 16, "40 sliding rows whole: one wave, not 80 halves on 49 slots (192)"},
    {48, 512, kTwoWarps, 16, "48 sliding rows whole"},
    {128, 512, kTwoWarps, 16, "128 rows whole"},
    // Smaller items for a short last wave where the fuller waves gain more than the extra items
    // cost (two-warp waves run faster part full).
    {40, 8192, kFourWarps, 32, "8K keys, 40 rows in halves: 2.5 waves of whole rows (run 193)"},
    {64, 8192, kTwoWarps, 32, "8K keys, 64 rows in halves: 1.3 waves of whole rows (run 193)"},
    {80, 8192, kTwoWarps, 64, "8K keys, 80 rows whole: thirds 5% slower (run 197)"},
    {112, 8192, kTwoWarps, 32, "8K keys, 112 rows in halves: 6% faster than whole (run 197)"},
    {128, 8192, kTwoWarps, 64, "8K keys, 128 rows whole"},
    {160, 8192, kTwoWarps, 64, "8K keys, 160 rows whole: 3.3 waves"},
    {256, 8192, kTwoWarps, 64, "8K keys, 256 rows whole (quarters 6.5% slower, run 195)"},
    {256, 32768, kTwoWarps, 64, "32K keys, 256 rows whole"},
    {6, 8192, kFourWarps, 32, "8K keys, 6 rows in halves: 2.33 -> 1.80x (run 197)"},
    {20, 8192, kFourWarps, 16, "8K keys, 20 rows in quarters: 1.93 -> 1.49x (run 197)"},
    {6, 32768, kFourWarps, 12, "32K keys, 6 rows: 1.86 -> 1.34x (run 197)"},
    {20, 131072, kFourWarps, 16, "128K keys, 20 rows: 1.63 -> 1.11x (run 197)"},
    {40, 131072, kFourWarps, 32, "128K keys, 40 rows: 1.26 -> 1.11x (run 197)"},
    // Long rows in few items: 6 rows of 128K keys were 3 items a row (18 items on 16 slots, two
    // waves); a 2,048-key split a warp makes six even waves (1.70 -> 1.17x, run 197).
    {6, 131072, kFourWarps, 4, "128K keys, 6 rows: 96 items"},
    {1, 131072, kFourWarps, 4, "128K keys, 1 row: 16 items"},
    // 131,091 keys are 63 splits of 64 tiles and one of 65: four rows, four rounds a warp.
    {4, 131091, kFourWarps, 16, "4 rows of 131,091 keys: 16 items, one wave"},
    // Past three waves of whole rows: 49-57 rows of 32K-128K keys were whole rows, a fourth
    // wave of 1-9 items (run 198: 32K keys, 49 rows 1.41 -> 1.26x; 128K keys 1.38 -> 1.14x).
    {49, 32768, kFourWarps, 32, "32K keys, 49 rows in halves"},
    {49, 131072, kFourWarps, 12, "128K keys, 49 rows in sixths"},
    {160, 32768, kTwoWarps, 32, "32K keys, 160 rows in halves (not measured: out of memory)"},
};

// The choices runs 192-198 measured (and the estimate's where marked).
TEST(DecodeItemSizes, ChoicesAtMeasuredShapes) {
  for (const Choice& c : kChoices) {
    SCOPED_TRACE(c.why);
    EXPECT_EQ(chosen(c.batch, c.keys, c.layout), c.splits_per_item);
  }
}

// Mixed lengths: every row's items are whole fold groups of at least `parallel` splits and no
// larger than the row's fold groups; a one-split row is one item.
TEST(DecodeItemSizes, ItemsAreWholeFoldGroupsWithinEachRow) {
  std::vector<SplitGrid> rows;
  for (int64_t keys : {1, 33, 512, 513, 2049, 4096, 40000}) rows.push_back(rows_of(1, keys)[0]);
  for (Layout l : {kFourWarps, kTwoWarps}) {
    const std::vector<int64_t> per_item = choose(rows, l.slots, l.parallel, kFold, l.speed);
    ASSERT_EQ(per_item.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(per_item[i] % kFold, 0) << "row " << i;
      EXPECT_GE(per_item[i], l.parallel) << "row " << i;
      EXPECT_LE(per_item[i], ceil_div(rows[i].splits, kFold) * kFold) << "row " << i;
    }
    EXPECT_GE(per_item[0], rows[0].splits);
  }
}

// A row's first and last splits on the aligned grid hold only its keys; items and rounds count
// their tiles.
TEST(DecodeItemSizes, PartialSplitsCountTheirTiles) {
  // 65,536 keys from slot 19: 64 splits of 32 tiles, then one of a tile (slots 65,536-65,554).
  const SplitGrid whole = attention_detail::split_grid(19, 65554);
  EXPECT_EQ(whole.splits, 65);
  EXPECT_EQ(longest_split(whole), 32);
  EXPECT_EQ(whole.tiles_of(0, 65), 64 * 32 + 1);
  EXPECT_EQ(item_warp_tiles(whole, 0, 8, 4), 2 * 32);
  EXPECT_EQ(item_warp_tiles(whole, 60, 5, 4), 32 + 1);  // the last round holds the tile alone
  EXPECT_EQ(item_warp_tiles(whole, 64, 1, 4), 1);

  const SplitGrid inner = attention_detail::split_grid(100, 5000);  // 128-key splits: 40
  EXPECT_EQ(inner.splits, 40);
  EXPECT_EQ(inner.tiles_of(0, 1), 1);    // keys 100-127
  EXPECT_EQ(inner.tiles_of(39, 40), 1);  // keys 4992-5000
  EXPECT_EQ(inner.tiles_of(0, 40), 38 * 4 + 2);
  EXPECT_EQ(item_warp_tiles(inner, 0, 4, 4), 4);  // a round as long as its longest split
  EXPECT_EQ(item_warp_tiles(inner, 36, 4, 4), 4);

  const SplitGrid one = attention_detail::split_grid(40, 70);  // one split: keys 40-70, 2 tiles
  EXPECT_EQ(one.splits, 2);                                    // one-tile splits up to 2,048 keys
  EXPECT_EQ(item_warp_tiles(one, 0, 2, 4), 1);
}

// A balanced grid's items and rounds: a round lasts as long as its longest split, and
// item_warp_tiles() never counts less (nor more than a longest split a round), as on the aligned
// grid, where it is exact.
TEST(DecodeItemSizes, RoundsLastAsTheirLongestSplit) {
  const SplitGrid whole = attention_detail::split_grid(0, 131090);  // 63 splits of 64, one of 65
  EXPECT_EQ(whole.tiles_of(0, 64), 4097);
  EXPECT_EQ(item_warp_tiles(whole, 0, 8, 4), 2 * 64);
  EXPECT_EQ(item_warp_tiles(whole, 56, 8, 4), 64 + 65);  // the last round holds the longer split
  EXPECT_EQ(item_warp_tiles(whole, 63, 1, 4), 65);

  std::mt19937 rng(5);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t lo = std::uniform_int_distribution<int64_t>(0, 5000)(rng);
    const int64_t hi = lo + std::uniform_int_distribution<int64_t>(0, 200000)(rng);
    const SplitGrid g = attention_detail::split_grid(lo, hi);
    const int64_t parallel = trial % 2 ? 4 : 2;
    const int64_t c0 = std::uniform_int_distribution<int64_t>(0, g.splits - 1)(rng);
    const int64_t count = std::uniform_int_distribution<int64_t>(1, g.splits - c0)(rng);
    int64_t exact = 0;
    for (int64_t b = c0; b < c0 + count; b += parallel) {
      int64_t longest = 0;
      for (int64_t j = b; j < std::min(b + parallel, c0 + count); ++j)
        longest = std::max(longest, g.tiles_of(j, j + 1));
      exact += longest;
    }
    const int64_t estimate = item_warp_tiles(g, c0, count, parallel);
    EXPECT_GE(estimate, exact) << lo << ".." << hi << " splits " << c0 << " +" << count;
    if (g.size > 0) {
      EXPECT_EQ(estimate, exact) << lo << ".." << hi;
    }
    EXPECT_LE(estimate, ceil_div(count, parallel) * longest_split(g));
  }
}

// choose() skips candidates by slowest_slot_bound(), so the bound must never exceed the estimate:
// random batches of mixed rows (whole and partial splits), every fold-group item size, both speeds.
TEST(DecodeItemSizes, BoundNeverExceedsTheEstimate) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t batch = std::uniform_int_distribution<int64_t>(1, 300)(rng);
    std::vector<SplitGrid> rows;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t hi = std::uniform_int_distribution<int64_t>(0, 200000)(rng);
      const int64_t lo = trial % 2 ? std::max<int64_t>(0, hi - 511) : 0;
      rows.push_back(attention_detail::split_grid(lo, hi));
    }
    for (Layout l : {kFourWarps, kTwoWarps}) {
      for (int64_t p = kFold; p <= 64; p += kFold) {
        const std::vector<int64_t> per_item(rows.size(), p);
        EXPECT_LE(slowest_slot_bound(rows, per_item, l.slots, l.parallel, l.speed),
                  slowest_slot(rows, per_item, l.slots, l.parallel, l.speed) + 1e-9)
            << "trial " << trial << ", " << p << " splits an item";
      }
    }
  }
}

// Rows of 8, 4 and 4 one-tile splits, 4 splits side by side.
const std::vector<SplitGrid> kSmallRows = {attention_detail::split_grid(0, 255),
                                           attention_detail::split_grid(0, 127),
                                           attention_detail::split_grid(0, 127)};

// The estimate: items longest first, round-robin over the slots; each costs its warps' tiles +
// kItemCost, + kCombineCost when its row is split, times its wave's speed.
TEST(DecodeItemSizes, SlowestSlotFollowsTheKernelsOrder) {
  // Whole rows: items of 8, 4 and 4 tiles on 2 slots: slot 0 takes the first (two rounds) and the
  // third (one), slot 1 the second.
  EXPECT_EQ(slowest_slot(kSmallRows, {8, 4, 4}, 2, 4, kOneSpeed),
            (2 + kItemCost) + (1 + kItemCost));
  // Halves of the first row (4 splits each, combined): 4 items of 4 tiles on 2 slots.
  EXPECT_EQ(slowest_slot(kSmallRows, {4, 4, 4}, 2, 4, kOneSpeed),
            (1 + kItemCost + kCombineCost) + (1 + kItemCost));
  EXPECT_EQ(slowest_slot(kSmallRows, {8, 4, 4}, 8, 4, kOneSpeed), 2 + kItemCost);
}

// A part-full wave runs faster at kHbmBoundWaves: the third item's wave holds 1 of 2 slots.
TEST(DecodeItemSizes, PartFullWavesRunFaster) {
  const double half_full = 0.6 + 0.4 / 2;  // kHbmBoundWaves: 3/5 + 2/5 x active / slots
  EXPECT_DOUBLE_EQ(slowest_slot(kSmallRows, {8, 4, 4}, 2, 4, kHbmBoundWaves), 3 + 2 * half_full);
  // One item on 8 slots: a wave of 1/8.
  EXPECT_DOUBLE_EQ(slowest_slot({kSmallRows[0]}, {8}, 8, 4, kHbmBoundWaves), 3 * (0.6 + 0.4 / 8));
}

}  // namespace
}  // namespace beam::cuda::decode_items
