// The split grid of an attention row: its keys are visited on a fixed grid of logical slots cut
// into splits of split_keys(n) slots, n the keys the row sees, and the split states are folded in
// split order. A numerics contract of the chunk and decode kernels (attention_kernels.cuh,
// attention_decode.cuh), shared with the host planner (attention.cu) and the CPU tests.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace beam::cuda::attention_detail {

constexpr int kMinSplitKeys = 32;  // the finest split: one 32-key tile
constexpr int kMaxSplits = 64;     // splits of a row's keys (one more where they straddle the grid)

// The split size of a row that sees n >= 1 keys: the smallest multiple of kMinSplitKeys that cuts
// n keys into at most kMaxSplits splits (one more when they straddle the grid), so a row of 16K
// keys or more has 57-64 splits of about n / 64 keys: a split a warp on the 66 warps of a KV head
// at batch 1 on an H200 (a power-of-two size left 33-64: 131,091 keys in 33 splits of 4,096).
BEAM_HOST_DEVICE constexpr int64_t split_keys(int64_t n) {
  constexpr int64_t kSpan = int64_t{kMinSplitKeys} * kMaxSplits;
  return n <= kSpan ? kMinSplitKeys : (n + kSpan - 1) / kSpan * kMinSplitKeys;
}

}  // namespace beam::cuda::attention_detail
