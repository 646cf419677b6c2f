// The split size of an attention row: its keys are visited on a fixed grid of logical slots cut
// into splits of split_keys(n) slots, n the keys the row sees, whose softmax states are folded in
// split order. A numerics contract of the chunk and decode kernels (attention_kernels.cuh), here
// so that host code (the planner's item sizes, their CPU tests and benchmark) uses the same one.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace beam::cuda::attention_detail {

constexpr int kMinSplitKeys = 32;  // the finest split grid on logical slots (multiple of kTile)
constexpr int kMaxSplits = 64;     // split_keys() doubles until a row has about this many splits

// The split size of a row that sees n keys: a power-of-two multiple of kMinSplitKeys with at
// most kMaxSplits splits of n keys (one more when they straddle the grid).
BEAM_HOST_DEVICE constexpr int64_t split_keys(int64_t n) {
  int64_t c = kMinSplitKeys;
  while (c * kMaxSplits < n) c *= 2;
  return c;
}

}  // namespace beam::cuda::attention_detail
