// The combining down kernel's combine (moe_small_batch.cuh, top of file): out[t] = sum_k w[t, k] *
// y[t, k] over the column tiles a block's unit range holds whole, and the ones split between blocks
// through per-tile tickets (the block completing a tile's count sums it). No float atomics.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/moe_small_groups.cuh"

namespace beam::cuda::moe_small {

// out[t, 16 m + c] = bf16(sum_k fma(w[t, k], f32(y[entry(t, k), 16 m + c]), acc)) in k order from
// acc = 0 (combine_kernel's operations), for the tiles m in [m_first, m_first + m_count) and every
// token; the block's threads take (tile, token, column) items, y read through L2 kCombineLoads
// slots at a time. Callers order the y stores before (a barrier; other blocks': their tickets).
constexpr int kCombineLoads = 8;
__device__ __forceinline__ void combine_tiles(const Args& p, const Tables& t, int m_first,
                                              int m_count) {
  constexpr int kCols = tile_cols<Phase::kDown>();
  const int tokens = p.rows / p.top_k, per_tile = tokens * kCols;
  for (int i = static_cast<int>(threadIdx.x); i < m_count * per_tile; i += kThreads) {
    const int tok = i % per_tile / kCols;
    const int64_t col = int64_t{m_first + i / per_tile} * kCols + i % kCols;
    if (col >= p.n) continue;
    const int32_t* entry = t.entry + tok * p.top_k;
    const float* w = t.weight + tok * p.top_k;
    float acc = 0.0f;
    for (int k0 = 0; k0 < p.top_k; k0 += kCombineLoads) {
      float v[kCombineLoads];
#pragma unroll
      for (int j = 0; j < kCombineLoads; ++j) {
        v[j] = k0 + j < p.top_k
                   ? __bfloat162float(__ldcg(p.out + int64_t{entry[k0 + j]} * p.n + col))
                   : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kCombineLoads; ++j) {
        if (k0 + j < p.top_k) acc = __fmaf_rn(w[k0 + j], v[j], acc);
      }
    }
    p.combined[int64_t{tok} * p.n + col] = __float2bfloat16_rn(acc);
  }
}

// The combining down kernel after its last unit [u_begin, u_end) (tile-major, tile_units(t) units
// per tile): sums the tiles its range holds whole, and a partial tile at either end once every
// block holding part of it has arrived (its ticket reaches tile_units; the last block sums it).
__device__ __forceinline__ void combine_range(const Args& p, Tables& t, int u_begin, int u_end) {
  const int per_tile = tile_units(t);
  const int m_head = u_begin / per_tile, m_tail = (u_end - 1) / per_tile;
  __syncthreads();  // the block's y stores (reducing warps) before any combine or ticket
  if (threadIdx.x == 0) {
    // Release this block's y (ordered before by the barrier) to the block completing a ticket.
    __threadfence();
    bool completed = false;
#pragma unroll
    for (int end = 0; end < 2; ++end) {
      const int m = end == 0 ? m_head : m_tail;
      const int held = min(u_end, (m + 1) * per_tile) - max(u_begin, m * per_tile);
      const bool partial = held < per_tile && (end == 0 || m_tail != m_head);
      const bool last = partial && atomicAdd(p.tickets + m, held) + held == per_tile;
      t.split_done[end] = last ? m : -1;
      completed = completed || last;
    }
    if (completed) __threadfence();  // acquire the other blocks' y (read after the barrier below)
  }
  // Whole tiles need no ticket (warp 0 joins once its lane 0 has arrived).
  const int m_whole = (u_begin + per_tile - 1) / per_tile;
  combine_tiles(p, t, m_whole, max(0, u_end / per_tile - m_whole));
  __syncthreads();  // t.split_done
#pragma unroll
  for (int end = 0; end < 2; ++end) {
    const int m = t.split_done[end];
    if (m >= 0) combine_tiles(p, t, m, 1);
  }
}

}  // namespace beam::cuda::moe_small
