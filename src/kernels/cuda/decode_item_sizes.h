// How the decode kernel's host planner (attention.cu) sizes its items: the splits of each row that
// one CTA computes, chosen against an estimate of the slowest CTA slot. Pure C++ (no CUDA), so
// that the CPU tests pin the choices the H200 runs measured (tests/unit/kernels).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace beam::cuda::decode_items {

// A decode row's split grid: `splits` splits of `tiles_per_split` 32-key tiles, of which the first
// and the last hold only the row's keys (`first_tiles` and `last_tiles` tiles; the same for a
// one-split row).
struct RowSplits {
  int64_t splits, tiles_per_split, first_tiles, last_tiles;
};

// The split grid of a row seeing keys [lo, hi] in splits of `split_keys` keys (a multiple of 32)
// on the slot grid (the planner's DecodeRow).
inline RowSplits row_splits(int64_t lo, int64_t hi, int64_t split_keys) {
  const int64_t first = lo / split_keys, last = hi / split_keys;
  const auto tiles = [](int64_t a, int64_t b) { return b / 32 - a / 32 + 1; };
  return {last - first + 1, split_keys / 32, tiles(lo, std::min(hi, (first + 1) * split_keys - 1)),
          tiles(std::max(lo, last * split_keys), hi)};
}

// Tiles of split j of row r.
inline int64_t split_tiles(const RowSplits& r, int64_t j) {
  return j == 0 ? r.first_tiles : j == r.splits - 1 ? r.last_tiles : r.tiles_per_split;
}

// Tiles of splits [c0, c0 + count) of row r.
inline int64_t item_tiles(const RowSplits& r, int64_t c0, int64_t count) {
  if (r.splits == 1) return r.first_tiles;
  int64_t tiles = count * r.tiles_per_split;
  if (c0 == 0) tiles -= r.tiles_per_split - r.first_tiles;
  if (c0 + count == r.splits) tiles -= r.tiles_per_split - r.last_tiles;
  return tiles;
}

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
// 256 rows whole, 5.2 waves, 6.5% faster than in quarters); four-warp CTAs (eight warps, bound by
// each warp's dependency chain) ran at one speed from 2 of 16 slots to 16 (low 1).
struct WaveSpeed {
  double low = 1;
};
constexpr WaveSpeed kOneSpeed{1}, kHbmBoundWaves{0.6};

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Tile times of the warps of an item of splits [c0, c0 + count) of row r, computed in rounds of
// `parallel` side by side (the kernel's order), each as long as its longest split.
inline int64_t item_warp_tiles(const RowSplits& r, int64_t c0, int64_t count, int64_t parallel) {
  const auto round = [&](int64_t begin, int64_t end) {  // splits [begin, end)
    if (std::max<int64_t>(begin, 1) < std::min(end, r.splits - 1)) return r.tiles_per_split;
    int64_t longest = 0;
    for (int64_t j : {begin, end - 1}) longest = std::max(longest, split_tiles(r, j));
    return longest;
  };
  const int64_t rounds = ceil_div(count, parallel);
  if (rounds == 1) return round(c0, c0 + count);
  return round(c0, c0 + parallel) + (rounds - 2) * r.tiles_per_split +
         round(c0 + (rounds - 1) * parallel, c0 + count);
}

// Splits per item of each row when each warp takes about `target` tiles (at least `parallel`
// splits an item, the splits a CTA computes side by side; items start on fold-group boundaries,
// `fold` splits).
inline std::vector<int64_t> splits_per_item(const std::vector<RowSplits>& rows, int64_t target,
                                            int64_t parallel, int64_t fold) {
  std::vector<int64_t> per_item;
  per_item.reserve(rows.size());
  for (const RowSplits& r : rows) {
    const int64_t wanted =
        ceil_div(r.splits, parallel * std::max<int64_t>(1, target / r.tiles_per_split));
    per_item.push_back(ceil_div(ceil_div(r.splits, wanted), fold) * fold);
  }
  return per_item;
}

// The estimated time (tile times) of the slowest of `slots` CTA slots when the items of
// `per_item` splits go longest first to slots y, y + slots, ... (the kernel's order), item i in
// wave i / slots at that wave's speed.
inline double slowest_slot(const std::vector<RowSplits>& rows, const std::vector<int64_t>& per_item,
                           int64_t slots, int64_t parallel, WaveSpeed speed) {
  std::vector<std::pair<int64_t, int64_t>> items;  // (tiles, cost)
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowSplits& r = rows[i];
    const int64_t n = ceil_div(r.splits, per_item[i]);
    for (int64_t c = 0; c < n; ++c) {
      const int64_t c0 = c * per_item[i], count = std::min(per_item[i], r.splits - c0);
      const int64_t cost =
          item_warp_tiles(r, c0, count, parallel) + kItemCost + (n > 1 ? kCombineCost : 0);
      items.push_back({item_tiles(r, c0, count), cost});
    }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const int64_t num_items = static_cast<int64_t>(items.size());
  std::vector<double> load(static_cast<size_t>(std::min(slots, num_items)), 0);
  for (int64_t i = 0; i < num_items; ++i) {
    const int64_t active = std::min(slots, num_items - i / slots * slots);
    const double factor = speed.low + (1 - speed.low) * static_cast<double>(active) / slots;
    load[static_cast<size_t>(i) % load.size()] += static_cast<double>(items[i].second) * factor;
  }
  return load.empty() ? 0 : *std::max_element(load.begin(), load.end());
}

// Splits per item of each row (rows not empty, slots >= 1): each warp about total tiles / (slots *
// parallel), or that times a power of two where the estimated slowest slot at `speed` says so:
// larger where strictly faster (fewer items: e.g. rows that would split into more items than
// slots, making a short second wave), smaller where faster by more than 1 / kSmallerItemGain
// (rows whose whole-row items leave a short last wave).
inline std::vector<int64_t> choose(const std::vector<RowSplits>& rows, int64_t slots,
                                   int64_t parallel, int64_t fold, WaveSpeed speed) {
  int64_t total = 0, longest = 0;                      // tiles
  int64_t smallest = rows.front().tiles_per_split;     // the smallest split's tiles
  for (const RowSplits& r : rows) {
    const int64_t tiles = item_tiles(r, 0, r.splits);
    total += tiles;
    longest = std::max(longest, tiles);
    smallest = std::min(smallest, r.tiles_per_split);
  }
  const int64_t share = ceil_div(total, slots * parallel);
  std::vector<int64_t> per_item = splits_per_item(rows, share, parallel, fold);
  double best = slowest_slot(rows, per_item, slots, parallel, speed);
  const auto consider = [&](int64_t target, bool smaller) {
    std::vector<int64_t> candidate = splits_per_item(rows, target, parallel, fold);
    const double estimate = slowest_slot(rows, candidate, slots, parallel, speed);
    const bool better =
        smaller ? estimate * kSmallerItemGain < best * (kSmallerItemGain - 1) : estimate < best;
    if (!better) return;
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
