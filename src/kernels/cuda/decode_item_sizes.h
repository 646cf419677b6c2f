// How the decode kernel's host planner (attention.cu) sizes its items: the splits of each row that
// one CTA computes, chosen against an estimate of the slowest CTA slot. Pure C++ (no CUDA), so
// that the CPU tests pin the choices the H200 runs measured (tests/unit/kernels).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace beam::cuda::decode_items {

// A decode row's split grid: `splits` splits of `tiles_per_split` 32-key tiles.
struct RowSplits {
  int64_t splits, tiles_per_split;
};

// Estimated costs of an item beyond its warps' tiles, in tile times: its start and fold, and (for
// an item of a row split over several) the records, the ticket and the row's last fold. Run 191,
// 512-key rows on two-warp CTAs: a wave of whole-row items (8 tiles a warp) 36-38 µs, two waves
// of half rows 48-55 µs.
constexpr int64_t kItemCost = 1;
constexpr int64_t kCombineCost = 2;
// A plan of more items than the balanced share's is taken only when its estimated slowest slot is
// shorter by more than 1 / kSmallerItemGain (the estimate leaves out the records' traffic, and at
// full HBM load a short last wave costs less than it counts: run 195, 8K keys, batch 256 in
// quarter rows 6.5% slower).
constexpr int64_t kSmallerItemGain = 16;
// Nor when the plan's items already fill more than this many waves of slots: such a plan keeps HBM
// busy but for its last wave, which then runs faster than the estimate counts (runs 193 and 195:
// halves of rows gained 9-11% from 1.3-2.5 waves of whole rows; quarters lost 6.5% from 5.2).
constexpr int64_t kSmallerItemMaxWaves = 3;

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
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
// `per_item` splits go longest first to slots y, y + slots, ... (the kernel's order).
inline int64_t slowest_slot(const std::vector<RowSplits>& rows,
                            const std::vector<int64_t>& per_item, int64_t slots, int64_t parallel) {
  std::vector<std::pair<int64_t, int64_t>> items;  // (tiles, cost)
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowSplits& r = rows[i];
    const int64_t n = ceil_div(r.splits, per_item[i]);
    for (int64_t c = 0; c < n; ++c) {
      const int64_t count = std::min(per_item[i], r.splits - c * per_item[i]);
      const int64_t cost =
          ceil_div(count, parallel) * r.tiles_per_split + kItemCost + (n > 1 ? kCombineCost : 0);
      items.push_back({count * r.tiles_per_split, cost});
    }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int64_t> load(static_cast<size_t>(std::min<int64_t>(slots, items.size())), 0);
  for (size_t i = 0; i < items.size(); ++i) load[i % load.size()] += items[i].second;
  return load.empty() ? 0 : *std::max_element(load.begin(), load.end());
}

// Splits per item of each row (rows not empty, slots >= 1): each warp about total tiles / (slots *
// parallel), or that times a power of two where the estimated slowest slot says so: larger where
// strictly faster (fewer items: e.g. rows that would split into more items than slots, making a
// second wave), smaller where faster by more than 1 / kSmallerItemGain (rows whose whole-row items
// leave a short last wave) and the items fill at most kSmallerItemMaxWaves waves.
inline std::vector<int64_t> choose(const std::vector<RowSplits>& rows, int64_t slots,
                                   int64_t parallel, int64_t fold) {
  int64_t total = 0, longest = 0;                      // tiles
  int64_t split_tiles = rows.front().tiles_per_split;  // the smallest split's tiles
  for (const RowSplits& r : rows) {
    total += r.splits * r.tiles_per_split;
    longest = std::max(longest, r.splits * r.tiles_per_split);
    split_tiles = std::min(split_tiles, r.tiles_per_split);
  }
  const int64_t share = ceil_div(total, slots * parallel);
  std::vector<int64_t> per_item = splits_per_item(rows, share, parallel, fold);
  int64_t best = slowest_slot(rows, per_item, slots, parallel);
  const auto consider = [&](int64_t target, bool smaller) {
    std::vector<int64_t> candidate = splits_per_item(rows, target, parallel, fold);
    const int64_t estimate = slowest_slot(rows, candidate, slots, parallel);
    const bool better =
        smaller ? estimate * kSmallerItemGain < best * (kSmallerItemGain - 1) : estimate < best;
    if (!better) return;
    per_item = std::move(candidate);
    best = estimate;
  };
  for (int64_t target = share * 2; target / 2 * parallel < longest; target *= 2)
    consider(target, false);
  int64_t items = 0;
  for (size_t i = 0; i < rows.size(); ++i) items += ceil_div(rows[i].splits, per_item[i]);
  if (items > kSmallerItemMaxWaves * slots) return per_item;
  // Below a split's tiles every target gives the same items.
  for (int64_t target = share / 2; target >= split_tiles; target /= 2) consider(target, true);
  return per_item;
}

}  // namespace beam::cuda::decode_items
