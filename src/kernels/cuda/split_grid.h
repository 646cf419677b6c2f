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
// The kernels call begin() for every tile, so it shifts and never divides (run 204: a 64-bit
// division by the size there cost the 512-key sliding decode 15-23%).
struct SplitGrid {
  int64_t tile0, tiles, splits, size;
  int shift;  // log2(size) on the aligned grid

  // The first tile of split i, 0 <= i <= splits (splits: one past the row's last tile).
  BEAM_HOST_DEVICE constexpr int64_t begin(int64_t i) const {
    static_assert(kMaxSplits == 64, "the balanced grid divides by a shift");
    if (size == 0) return tile0 + ((i * tiles) >> 6);
    const int64_t t = ((tile0 >> shift) + i) << shift;
    return t < tile0 ? tile0 : t > tile0 + tiles ? tile0 + tiles : t;
  }
  // The split holding tile t, tile0 <= t < tile0 + tiles: the largest i with begin(i) <= t.
  BEAM_HOST_DEVICE constexpr int64_t split_of(int64_t t) const {
    if (size > 0) return (t >> shift) - (tile0 >> shift);
    // Below 2^26 tiles and (x + 1) * 64 < 2^32: a 32-bit division on the device.
    const int64_t x = t - tile0;
    return static_cast<uint32_t>((x + 1) * kMaxSplits - 1) / static_cast<uint32_t>(tiles);
  }
  // Tiles of splits [i, j).
  BEAM_HOST_DEVICE constexpr int64_t tiles_of(int64_t i, int64_t j) const {
    return begin(j) - begin(i);
  }
  BEAM_HOST_DEVICE constexpr bool operator==(const SplitGrid& o) const {
    return tile0 == o.tile0 && tiles == o.tiles && splits == o.splits && size == o.size &&
           shift == o.shift;
  }
};

BEAM_HOST_DEVICE constexpr SplitGrid split_grid(int64_t lo, int64_t hi) {
  const int64_t tile0 = lo / kGridTile, tiles = hi / kGridTile - tile0 + 1, n = hi - lo + 1;
  if (n > kBalancedKeys) return {tile0, tiles, kMaxSplits, 0, 0};
  int shift = 0;
  while ((int64_t{kGridTile} * kMaxSplits << shift) < n) ++shift;
  return {tile0, tiles, ((hi / kGridTile) >> shift) - (tile0 >> shift) + 1, int64_t{1} << shift,
          shift};
}

}  // namespace beam::cuda::attention_detail
