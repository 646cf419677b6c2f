// How the decode kernel's host planner (attention.cu) sizes its items: the splits of each row that
// one CTA computes, chosen against an estimate of the slowest CTA slot. Pure C++ (no CUDA), so
// that the CPU tests pin the choices the H200 runs measured (tests/unit/kernels). A row's splits
// (split_grid.h) are whole tiles: aligned ones of one size but for a partial first and last, or
// balanced ones whose sizes differ by at most a tile.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cuda/split_grid.h"

namespace beam::cuda::decode_items {

using attention_detail::SplitGrid;  // a decode row's splits (split_grid.h)

// Estimated costs of an item beyond its warps' tiles, in tile times: its start and fold, and (for
// an item of a row split over several) the records, the ticket and the row's last fold. Run 191,
// 512-key rows on two-warp CTAs: a wave of whole-row items (8 tiles a warp) 36-38 µs, two waves
// of half rows 48-55 µs.
constexpr int64_t kItemCost = 1;
constexpr int64_t kCombineCost = 2;
// A plan of more items than the balanced share's is taken only when its estimated slowest slot is
// shorter by more than 1 / kSmallerItemGain (the estimate leaves out the records' traffic; runs
// 194-197 put its error at ~5%).
constexpr int64_t kSmallerItemGain = 16;

// How a wave's speed follows its load: a wave of items on `active` of `slots` slots costs its
// items' costs x (low + (1 - low) x active / slots). Fitted to runs 191-197: two-warp CTAs (six
// warps an SM) are bound by HBM when every slot runs, so a part-full wave streams faster per warp
// (low 3/5: 80 rows of 8K keys in whole rows, 1.6 waves, 5% faster than in thirds, 4.9 waves;
// 256 rows whole, 5.2 waves, 6.5% faster than in quarters); four-warp CTAs (one an SM, each
// warp's dependency chain setting its pace) ran at one speed from 2 of 16 slots to 16 (low 1).
struct WaveSpeed {
  int64_t low_num = 1, low_den = 1;  // low = low_num / low_den
};
constexpr WaveSpeed kOneSpeed{1, 1}, kHbmBoundWaves{3, 5};

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The tiles of row r's longest split (an aligned grid's size).
inline int64_t longest_split(const SplitGrid& r) {
  return r.size > 0 ? r.size : ceil_div(r.tiles, r.splits);
}

// Tiles of row r the estimate counts at least: all of an aligned grid's; a balanced grid's splits
// at their shorter size (slowest_slot takes a row's middle items as long as its second).
inline int64_t counted_tiles(const SplitGrid& r) {
  return r.size > 0 ? r.tiles : r.splits * (r.tiles / r.splits);
}

// Tile times of the warps of an item of splits [c0, c0 + count) of row r, computed in rounds of
// `parallel` side by side (the kernel's order), each as long as its longest split. Aligned grid:
// exact (only the row's first and last splits may be shorter). Balanced grid: the rounds' shorter
// size plus a tile for each round that may hold a longer split (at most as many as the item's
// longer splits: exact where they lie a round apart or more).
inline int64_t item_warp_tiles(const SplitGrid& r, int64_t c0, int64_t count, int64_t parallel) {
  const int64_t rounds = ceil_div(count, parallel);
  if (r.size == 0) {
    const int64_t shorter = r.tiles / r.splits;
    const int64_t longer = r.tiles_of(c0, c0 + count) - shorter * count;
    return rounds * shorter + std::min(rounds, longer);
  }
  const auto round = [&](int64_t begin, int64_t end) {  // splits [begin, end)
    if (std::max<int64_t>(begin, 1) < std::min<int64_t>(end, r.splits - 1)) {
      return int64_t{r.size};
    }
    int64_t longest = 0;
    for (int64_t j : {begin, end - 1}) longest = std::max(longest, r.tiles_of(j, j + 1));
    return longest;
  };
  if (rounds == 1) return round(c0, c0 + count);
  return round(c0, c0 + parallel) + (rounds - 2) * r.size +
         round(c0 + (rounds - 1) * parallel, c0 + count);
}

// Splits per item of each row when each warp takes about `target` tiles (at least `parallel`
// splits an item, the splits a CTA computes side by side; items start on fold-group boundaries,
// `fold` splits).
inline std::vector<int64_t> splits_per_item(const std::vector<SplitGrid>& rows, int64_t target,
                                            int64_t parallel, int64_t fold) {
  std::vector<int64_t> per_item;
  per_item.reserve(rows.size());
  for (const SplitGrid& r : rows) {
    // Splits of the row in `target` tiles (a balanced grid's at their mean size), at least one.
    const int64_t per_warp = r.size > 0 ? target / r.size : target * r.splits / r.tiles;
    const int64_t wanted = ceil_div(r.splits, parallel * std::max<int64_t>(1, per_warp));
    per_item.push_back(ceil_div(ceil_div(r.splits, wanted), fold) * fold);
  }
  return per_item;
}

// The estimated time (tile times) of the slowest of `slots` CTA slots when the items of
// `per_item` splits go longest first to slots y, y + slots, ... (the kernel's order), item i in
// wave i / slots at that wave's speed. A row's items are three runs of equal items (its first,
// its middle ones, its last; a balanced grid's middle items are taken as long as its second, their
// tiles differing by at most a tile a split), so the runs are sorted instead of the items, and each
// run adds to a range of slots a wave; sums are exact (integers in units of 1 / (low_den * slots)).
inline double slowest_slot(const std::vector<SplitGrid>& rows, const std::vector<int64_t>& per_item,
                           int64_t slots, int64_t parallel, WaveSpeed speed) {
  struct Run {
    int64_t tiles, cost, count;
  };
  std::vector<Run> runs;  // in the rows' item order
  runs.reserve(rows.size() * 3);
  int64_t num_items = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SplitGrid& r = rows[i];
    const int64_t p = per_item[i], n = ceil_div(r.splits, p);
    const auto add = [&](int64_t c, int64_t count) {  // `count` items like item c
      const int64_t c0 = c * p, splits = std::min(p, r.splits - c0);
      runs.push_back(
          {r.tiles_of(c0, c0 + splits),
           item_warp_tiles(r, c0, splits, parallel) + kItemCost + (n > 1 ? kCombineCost : 0),
           count});
    };
    add(0, 1);
    if (n > 2) add(1, n - 2);
    if (n > 1) add(n - 1, 1);
    num_items += n;
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const Run& a, const Run& b) { return a.tiles > b.tiles; });
  const int64_t used = std::min(slots, num_items);
  std::vector<int64_t> diff(static_cast<size_t>(used) + 1, 0);  // slot loads' differences
  int64_t i = 0;                                                // the next item
  for (const Run& run : runs) {
    for (int64_t left = run.count; left > 0;) {
      const int64_t wave = i / slots, slot = i % slots, len = std::min(left, slots - slot);
      const int64_t active = std::min(slots, num_items - wave * slots);
      const int64_t add =
          run.cost * (speed.low_num * slots + (speed.low_den - speed.low_num) * active);
      diff[static_cast<size_t>(slot)] += add;
      diff[static_cast<size_t>(slot + len)] -= add;
      i += len;
      left -= len;
    }
  }
  int64_t load = 0, slowest = 0;
  for (int64_t s = 0; s < used; ++s)
    slowest = std::max(slowest, load += diff[static_cast<size_t>(s)]);
  return static_cast<double>(slowest) / static_cast<double>(speed.low_den * slots);
}

// A lower bound of slowest_slot() without sorting (the planner runs per layer on eager steps, so
// a candidate that cannot win is not estimated): the slots' mean load, where only the last wave
// runs faster than full speed, by at most (1 - low) x the largest item cost. Each item costs at
// least its counted tiles / parallel + kItemCost (+ kCombineCost in a split row).
inline double slowest_slot_bound(const std::vector<SplitGrid>& rows,
                                 const std::vector<int64_t>& per_item, int64_t slots,
                                 int64_t parallel, WaveSpeed speed) {
  int64_t num_items = 0, largest = 0;
  double costs = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SplitGrid& r = rows[i];
    const int64_t n = ceil_div(r.splits, per_item[i]);
    const int64_t extra = kItemCost + (n > 1 ? kCombineCost : 0);
    num_items += n;
    costs += static_cast<double>(counted_tiles(r)) / static_cast<double>(parallel) +
             static_cast<double>(n * extra);
    largest = std::max(
        largest,
        ceil_div(std::min<int64_t>(per_item[i], r.splits), parallel) * longest_split(r) + extra);
  }
  const double low = static_cast<double>(speed.low_num) / static_cast<double>(speed.low_den);
  return costs / static_cast<double>(std::min(slots, num_items)) -
         (1 - low) * static_cast<double>(largest);
}

// Splits per item of each row (rows not empty, slots >= 1): each warp about total tiles / (slots *
// parallel), or that times a power of two where the estimated slowest slot at `speed` says so:
// larger where strictly faster (fewer items: e.g. rows that would split into more items than
// slots, making a short second wave), smaller where faster by more than 1 / kSmallerItemGain
// (rows whose whole-row items leave a short last wave).
inline std::vector<int64_t> choose(const std::vector<SplitGrid>& rows, int64_t slots,
                                   int64_t parallel, int64_t fold, WaveSpeed speed) {
  int64_t total = 0, longest = 0;                  // tiles
  int64_t smallest = longest_split(rows.front());  // the smallest rows' split size
  for (const SplitGrid& r : rows) {
    total += r.tiles;
    longest = std::max<int64_t>(longest, r.tiles);
    smallest = std::min(smallest, longest_split(r));
  }
  const int64_t share = ceil_div(total, slots * parallel);
  std::vector<int64_t> per_item = splits_per_item(rows, share, parallel, fold);
  double best = slowest_slot(rows, per_item, slots, parallel, speed);
  std::vector<int64_t> last = per_item;  // the last candidate seen (targets often repeat one)
  const auto consider = [&](int64_t target, bool smaller) {
    std::vector<int64_t> candidate = splits_per_item(rows, target, parallel, fold);
    if (candidate == last) return;
    last = candidate;
    const auto better = [&](double estimate) {
      return smaller ? estimate * kSmallerItemGain < best * (kSmallerItemGain - 1)
                     : estimate < best;
    };
    if (!better(slowest_slot_bound(rows, candidate, slots, parallel, speed))) return;
    const double estimate = slowest_slot(rows, candidate, slots, parallel, speed);
    if (!better(estimate)) return;
    per_item = std::move(candidate);
    best = estimate;
  };
  for (int64_t target = share * 2; target / 2 * parallel < longest; target *= 2)
    consider(target, false);
  // Below a split's tiles every target gives the same items.
  for (int64_t target = share / 2; target >= smallest; target /= 2) consider(target, true);
  return per_item;
}

}  // namespace beam::cuda::decode_items
