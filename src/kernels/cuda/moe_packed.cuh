// The packed layout of routed-expert weights on CUDA (kernels/api/moe.h's pack_expert_weights),
// used when the hidden and expert widths are multiples of 64 (packed_widths). An expert's
// matrix [n_rows, K] is stored as m16 tiles of 16 weight rows, each tile as K / 64 k64 steps of
// 16 rows x 64 columns (2 KB, row-major inside): a tile's step is contiguous, so the small-batch
// kernels (moe_small_batch.cuh) read 2 KB runs where row-major weights gave them 64 bytes of each
// of 16 rows 10 KB apart, and a step's rows are 128 bytes, the grouped GEMM's TMA rows under its
// 128-byte swizzle. The 16 rows of tile m are in the order the kernels' fragments and the grouped
// GEMM's boxes want them:
//   gate_up (SwiGLU, n = I output columns): rows i < 8 the gate rows 8 m + i, rows i >= 8 the up
//     rows n + 8 m + (i - 8) (one tile = 8 act columns);
//   down (n = H output columns): row i holds column 16 m + 2 (i % 8) + i / 8 (the 8 even, then the
//     8 odd columns of 16 m .. 16 m + 15: a thread's accumulator pair is a bf16 pair).
// Same size as row-major (no padding: the widths are multiples of 64), element offsets in int64.
#pragma once

#include <cstdint>

namespace beam::cuda::moe_packed {

constexpr int kTileRows = 16;
constexpr int kStepCols = 64;
constexpr int kStepElems = kTileRows * kStepCols;  // 1024 bf16: one k64 step of a tile

// Widths (hidden H, expert width I) whose expert weights are packed on CUDA.
constexpr bool packed_widths(int64_t H, int64_t I) {
  return H % kStepCols == 0 && I % kStepCols == 0;
}

// The logical weight row of tile m's row i (0 <= i < 16); swiglu: gate_up with n = I, else down.
__host__ __device__ constexpr int64_t logical_row(bool swiglu, int64_t n, int64_t m, int i) {
  return swiglu ? (i < 8 ? 8 * m + i : n + 8 * m + (i - 8)) : 16 * m + 2 * (i % 8) + i / 8;
}

// The tile m and its row i holding logical weight row `row` (logical_row's inverse).
__host__ __device__ constexpr void tile_of_row(bool swiglu, int64_t n, int64_t row, int64_t& m,
                                               int& i) {
  if (swiglu) {
    const bool up = row >= n;
    const int64_t j = up ? row - n : row;
    m = j / 8;
    i = static_cast<int>(j % 8) + (up ? 8 : 0);
  } else {
    m = row / 16;
    i = static_cast<int>(row % 16 / 2 + 8 * (row % 2));
  }
}

// Element offset within one expert's packed matrix of K columns: tile m, its row i, column k.
__host__ __device__ constexpr int64_t offset(int64_t k_cols, int64_t m, int i, int64_t k) {
  return ((m * (k_cols / kStepCols) + k / kStepCols) * kTileRows + i) * kStepCols + k % kStepCols;
}

}  // namespace beam::cuda::moe_packed
