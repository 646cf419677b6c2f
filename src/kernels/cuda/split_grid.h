// The split grid of an attention row: the 32-slot tiles of the logical slots the row sees, cut
// into splits of whole tiles whose softmax states are folded in split order. A numerics contract
// of the chunk and decode kernels (attention_kernels.cuh, attention_decode.cuh), shared with the
// host planner (attention.cu, decode_item_sizes.h) and the CPU tests.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace beam::cuda::attention_detail {

constexpr int kGridTile = 32;   // slots of a tile of the grid (the kernels' kTile)
constexpr int kMaxSplits = 64;  // splits of a row: its tiles, up to this many
static_assert((kMaxSplits & (kMaxSplits - 1)) == 0, "begin() divides by a shift");

// The grid of a row that sees slots [lo, hi] (below 2^31): its tiles tile0 = lo / 32 to hi / 32,
// cut into splits = min(tiles, kMaxSplits) splits whose sizes differ by at most a tile, split i
// holding tiles [begin(i), begin(i + 1)), begin(i) = tile0 + floor(i * tiles / splits). A row of
// 64 tiles or more has exactly 64 splits: a split a warp on the 64 four-warp warps of a KV head
// at batch 1 on an H200, b splits a warp at batch b (splits of a power-of-two size left 33-64:
// 131,091 keys in 33 splits of 4,096, one warp in two idle). Every split of a row of at most 64
// tiles (2,048 keys from slot 0) is one tile.
struct SplitGrid {
  int64_t tile0, tiles, splits;

  // The first tile of split i, 0 <= i <= splits (splits: one past the row's last tile).
  BEAM_HOST_DEVICE constexpr int64_t begin(int64_t i) const {
    return tile0 + (tiles <= kMaxSplits ? i : i * tiles / kMaxSplits);
  }
  // The split holding tile t, tile0 <= t < tile0 + tiles: the largest i with begin(i) <= t.
  BEAM_HOST_DEVICE constexpr int64_t split_of(int64_t t) const {
    const int64_t x = t - tile0;  // (x + 1) * 64 < 2^32: 32-bit division on the device
    return tiles <= kMaxSplits
               ? x
               : static_cast<uint32_t>((x + 1) * kMaxSplits - 1) / static_cast<uint32_t>(tiles);
  }
  // Tiles of splits [i, j).
  BEAM_HOST_DEVICE constexpr int64_t tiles_of(int64_t i, int64_t j) const {
    return begin(j) - begin(i);
  }
  BEAM_HOST_DEVICE constexpr bool operator==(const SplitGrid& o) const {
    return tile0 == o.tile0 && tiles == o.tiles;
  }
};

BEAM_HOST_DEVICE constexpr SplitGrid split_grid(int64_t lo, int64_t hi) {
  const int64_t tile0 = lo / kGridTile, tiles = hi / kGridTile - tile0 + 1;
  return {tile0, tiles, tiles < kMaxSplits ? tiles : kMaxSplits};
}

}  // namespace beam::cuda::attention_detail
