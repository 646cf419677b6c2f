// The split grid of an attention row: the 32-slot tiles of the logical slots the row sees, cut
// into splits of whole tiles whose softmax states are folded in split order. A numerics contract
// of the chunk and decode kernels (attention_kernels.cuh, attention_decode.cuh), shared with the
// host planner (attention.cu, decode_item_sizes.h) and the CPU tests.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace beam::cuda::attention_detail {

constexpr int kGridTile = 32;   // slots of a tile of the grid (the kernels' kTile)
constexpr int kMaxSplits = 64;  // splits of a row, at most
// Keys from which a row's splits are balanced instead of aligned (2,048 tiles).
constexpr int64_t kBalancedKeys = int64_t{kGridTile} * kMaxSplits * kMaxSplits / 2;

// The grid of a row that sees slots [lo, hi] (below 2^31), n = hi - lo + 1 keys, tiles tile0 =
// lo / 32 to hi / 32, in one of two forms:
//  - aligned (n <= kBalancedKeys, size > 0): splits of `size` tiles on the slot grid (multiples
//    of `size` tiles; the row's first and last splits may be partial), size the smallest power of
//    two giving at most 64 splits of n keys (one more where they straddle the grid): one-tile
//    splits up to 2,048 keys, then 33-64 splits. Batches of many rows pay for every split a CTA
//    barrier (H200 run 202: 64 splits of 8,200 keys instead of 33 cost 32 rows 7-9%);
//  - balanced (longer rows, size = 0): exactly 64 splits whose sizes differ by at most a tile,
//    begin(i) = tile0 + floor(i * tiles / 64): a split a warp on a KV head's 64 warps at batch 1
//    on an H200, where the aligned form left up to half of them idle (131,091 keys: 33 splits of
//    4,096; run 202: the decode attention 2.03-2.05 -> 1.21-1.23x of its floor).
// The kernels evaluate the grid for every item and split, so it is 32-bit integer arithmetic with
// shifts and no division or loop (H200 runs 204-206: a 64-bit division by the size there cost the
// sliding decode 15-23%, 64-bit begin() and a loop in split_grid() still 7-10%; this form is even
// with 2e5a9b4's power-of-two grid within 1-3%).
struct SplitGrid {
  int32_t tile0, tiles, splits, size;  // size 0: balanced
  int32_t shift;                       // log2(size) on the aligned grid

  // The first tile of split i, 0 <= i <= splits + 64 (splits: one past the row's last tile; the
  // kernels' warps look a round past it).
  BEAM_HOST_DEVICE constexpr int64_t begin(int64_t i) const {
    static_assert(kMaxSplits == 64, "the balanced grid divides by a shift");
    const auto k = static_cast<int32_t>(i);
    if (size == 0) {  // i * tiles < 2^33: one wide multiply
      const uint64_t part = uint64_t{static_cast<uint32_t>(k)} * static_cast<uint32_t>(tiles);
      return tile0 + static_cast<int32_t>(part >> 6);
    }
    const int32_t t = ((tile0 >> shift) + k) << shift, end = tile0 + tiles;
    return t < tile0 ? tile0 : t > end ? end : t;
  }
  // The split holding tile t, tile0 <= t < tile0 + tiles: the largest i with begin(i) <= t.
  BEAM_HOST_DEVICE constexpr int64_t split_of(int64_t t) const {
    const auto tile = static_cast<int32_t>(t);
    if (size > 0) return (tile >> shift) - (tile0 >> shift);
    // (x + 1) * 64 <= 2^32 (at most 2^26 tiles): a 32-bit division.
    const auto x = static_cast<uint32_t>(tile - tile0);
    return ((x + 1) * kMaxSplits - 1) / static_cast<uint32_t>(tiles);
  }
  // Tiles of splits [i, j).
  BEAM_HOST_DEVICE constexpr int64_t tiles_of(int64_t i, int64_t j) const {
    return begin(j) - begin(i);
  }
  // True when tile t is the last of its split (false outside the row's tiles).
  BEAM_HOST_DEVICE constexpr bool ends_split(int64_t t) const {
    return t >= tile0 && t < tile0 + tiles && t + 1 == begin(split_of(t) + 1);
  }
  constexpr bool operator==(const SplitGrid&) const = default;
};

// The aligned grid of splits of 1 << shift tiles over tiles [tile0, last].
BEAM_HOST_DEVICE constexpr SplitGrid aligned_grid(int32_t tile0, int32_t last, int32_t shift) {
  return {tile0, last - tile0 + 1, (last >> shift) - (tile0 >> shift) + 1, 1 << shift, shift};
}

// The grid of a row seeing slots [lo, hi], 0 <= lo <= hi < 2^31.
BEAM_HOST_DEVICE constexpr SplitGrid split_grid(int64_t lo64, int64_t hi64) {
  const auto lo = static_cast<int32_t>(lo64), hi = static_cast<int32_t>(hi64);
  const int32_t tile0 = lo / kGridTile, last = hi / kGridTile, n = hi - lo + 1;
  if (n > kBalancedKeys) return {tile0, last - tile0 + 1, kMaxSplits, 0, 0};
  // The smallest shift with 2,048 << shift >= n: bit_width(m) for m = (n - 1) / 2,048 <= 31.
  const int32_t m = (n - 1) >> 11;
  static_assert(kGridTile * kMaxSplits == 1 << 11 && kBalancedKeys == 32 << 11);
  return aligned_grid(tile0, last, (m >= 1) + (m >= 2) + (m >= 4) + (m >= 8) + (m >= 16));
}

}  // namespace beam::cuda::attention_detail
