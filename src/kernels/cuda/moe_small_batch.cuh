// Small-batch routed experts (kernels/cuda/moe_experts.cu, used when T * top_k rows are few, as
// in decode): bandwidth-bound warp dot products instead of 64-row mma tiles. Every selected
// expert's weight rows are spread over the whole grid (a block owns a few output columns of EVERY
// selected expert), each warp streams two weight rows with 16-byte non-caching loads and applies
// them to all rows routed to that expert. Every fp32 dot product is summed in a fixed order
// (per-lane chunks in ascending order, then a butterfly over the warp), and the down kernel keeps
// its block's expert outputs in shared memory and combines them per token in k order: results are
// run-to-run identical, with no atomics. Rounding points as kernels/cpu/moe_experts.cpp: gate and
// up rounded to bf16, act = bf16(silu(g) * u), y rounded to bf16, out = bf16(Σ_k w_k * y_k).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/torch_exp.cuh"

namespace beam::cuda::moe_small {

using bf16_t = __nv_bfloat16;

constexpr int kMaxRows = 1024;  // routed rows T * top_k this path accepts (one prep thread each)
constexpr int kWarps = 4;      // warps per block of the two projection kernels
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 2;  // weight rows a warp streams together (gate + up, or 2 of down)
constexpr int kTokens = 8;  // rows of one expert per pass over its weight rows (T = 128 at
                            // top-8 of 256: ~4.2 rows per expert; more re-read from L2)
constexpr int kGateUpUnroll = 4;  // chunks per lane in flight per weight row (H = 5120: 20 / lane)
constexpr int kDownUnroll = 4;    // (I = 2560: 10 chunks of 8 per lane; 5 spills at 96 registers)
constexpr int kActColsPerBlock = kWarps;                 // gate_up: one act column per warp
constexpr int kOutColsPerBlock = kWarps * kRowsPerWarp;  // down: two output columns per warp
// Blocks resident per SM the projection kernels are compiled for (<= 96 registers): at Beam's
// widths both grids have 640 blocks, one wave over 132 SMs x 5 (at 4, a fifth of the blocks
// would run as a second, quarter-occupancy wave).
constexpr int kMinBlocksPerSm = 5;

// The routed rows grouped by expert (written by group_kernel into the scratch).
struct Groups {
  int32_t* num_groups;    // [1] distinct experts routed to
  int32_t* expert;        // [rows] expert of group g, ascending
  int32_t* begin;         // [rows + 1] first grouped row of group g; begin[num_groups] = rows
  int32_t* row_token;     // [rows] token of each grouped row
  int32_t* entry_of;      // [rows] grouped row of slot t * top_k + k
};

// One block of kMaxRows threads, thread s for slot s: grouped rows in expert order, slots of one
// expert in increasing slot order (the CPU's bucket order), computed by counting without atomics
// (four slots per shared-memory read; padding slots hold INT32_MAX, above every expert).
// An id outside [0, E) traps (the CPU op aborts).
__global__ void __launch_bounds__(kMaxRows)
    group_kernel(const int32_t* ids, int rows, int top_k, int num_experts, Groups g) {
  __shared__ __align__(16) int32_t slot_expert[kMaxRows];
  __shared__ __align__(16) int32_t first_expert[kMaxRows];  // e if slot s is e's first, else max
  const int s = static_cast<int>(threadIdx.x);
  const int padded = (rows + 3) / 4 * 4;
  int e = INT32_MAX;
  if (s < rows) {
    e = ids[s];
    if (e < 0 || e >= num_experts) __trap();
  }
  slot_expert[s] = e;
  __syncthreads();
  int before = 0, rank = 0;  // slots on lower experts; earlier slots on e
  if (s < rows) {
    for (int j = 0; j < padded; j += 4) {
      const int4 q = *reinterpret_cast<const int4*>(&slot_expert[j]);
      before += (q.x < e) + (q.y < e) + (q.z < e) + (q.w < e);
      rank += (q.x == e && j < s) + (q.y == e && j + 1 < s) + (q.z == e && j + 2 < s) +
              (q.w == e && j + 3 < s);
    }
  }
  const bool first = s < rows && rank == 0;
  first_expert[s] = first ? e : INT32_MAX;
  const int num_groups = __syncthreads_count(first);
  if (s < rows) {
    const int row = before + rank;
    g.row_token[row] = s / top_k;
    g.entry_of[s] = row;
    if (rank == 0) {
      int group = 0;  // distinct experts below e
      for (int j = 0; j < padded; j += 4) {
        const int4 q = *reinterpret_cast<const int4*>(&first_expert[j]);
        group += (q.x < e) + (q.y < e) + (q.z < e) + (q.w < e);
      }
      g.expert[group] = e;
      g.begin[group] = before;
    }
  }
  if (s == 0) {
    *g.num_groups = num_groups;
    g.begin[num_groups] = rows;
  }
}

// kVec bf16 values as loaded: one 16-byte access (kVec == 8) or one scalar (kVec == 1).
template <int kVec>
struct Raw;
template <>
struct Raw<8> {
  uint4 bits;
};
template <>
struct Raw<1> {
  uint16_t bits;
};

// Weights are read once: non-caching in L1, 256-byte L2 prefetch. Only for kVec == 8 alignment.
__device__ __forceinline__ Raw<8> load_stream(const bf16_t* p, Raw<8>) {
  Raw<8> r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.bits.x), "=r"(r.bits.y), "=r"(r.bits.z), "=r"(r.bits.w)
               : "l"(p));
  return r;
}
__device__ __forceinline__ Raw<1> load_stream(const bf16_t* p, Raw<1>) {
  return Raw<1>{__ldg(reinterpret_cast<const unsigned short*>(p))};
}
// Activations (x or act rows) are re-read by the block's other warps: through L1.
__device__ __forceinline__ Raw<8> load_cached(const bf16_t* p, Raw<8>) {
  return Raw<8>{__ldg(reinterpret_cast<const uint4*>(p))};
}
__device__ __forceinline__ Raw<1> load_cached(const bf16_t* p, Raw<1>) {
  return Raw<1>{__ldg(reinterpret_cast<const unsigned short*>(p))};
}

// Element i of a raw pack, widened exactly to fp32.
__device__ __forceinline__ float widen(const Raw<8>& r, int i) {
  const uint32_t word = i / 2 == 0 ? r.bits.x : i / 2 == 1 ? r.bits.y : i / 2 == 2 ? r.bits.z
                                                                                    : r.bits.w;
  return __uint_as_float(i % 2 == 0 ? word << 16 : word & 0xffff0000u);
}
__device__ __forceinline__ float widen(const Raw<1>& r, int) {
  return __uint_as_float(static_cast<uint32_t>(r.bits) << 16);
}

// Per-lane partial dot products acc[r][t] = Σ w[r][c] * a[t][c] over this lane's chunks of kVec
// columns (chunk lane + 32 j, j ascending; columns of a chunk in order), for n <= kTokens
// activation rows. k is a multiple of kVec (kVec == 8: every row 16-byte aligned).
template <int kVec, int kUnroll>
__device__ __forceinline__ void lane_dots(const bf16_t* const (&w)[kRowsPerWarp],
                                          const bf16_t* const (&a)[kTokens], int n, int64_t k,
                                          int lane, float (&acc)[kRowsPerWarp][kTokens]) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;
  const int64_t chunks = k / kVec;
  for (int64_t base = lane; base < chunks; base += 32 * kUnroll) {
    Raw<kVec> wv[kRowsPerWarp][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {  // every load of this round first: bytes in flight
      const int64_t c = base + 32 * u;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        wv[r][u] = c < chunks ? load_stream(w[r] + c * kVec, Raw<kVec>{}) : Raw<kVec>{};
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      if (c >= chunks) break;
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= n) break;
        const Raw<kVec> av = load_cached(a[t] + c * kVec, Raw<kVec>{});
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const float ai = widen(av, i);
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r)
            acc[r][t] = __fmaf_rn(widen(wv[r][u], i), ai, acc[r][t]);
        }
      }
    }
  }
}

// Butterfly sum over the warp (fixed order; every lane gets the same total).
__device__ __forceinline__ float warp_total(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

struct GateUpArgs {
  const bf16_t* x;        // [T, H]
  const bf16_t* gate_up;  // [E, 2 I, H]: gate rows then up rows
  Groups groups;
  int64_t H, I;
  bf16_t* act;  // [rows, I] in grouped row order
};

// Grid: x = ceil(I / kActColsPerBlock). Warp w computes act column j = blockIdx.x * kWarps + w
// of every grouped row: for each selected expert, its gate row j and up row j against the x rows
// of the tokens routed to it, then act = bf16(silu(bf16 g) * bf16 u) as the CPU.
template <int kVec>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) gate_up_kernel(GateUpArgs p) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kActColsPerBlock + warp;
  if (j >= p.I) return;  // no block-wide synchronisation in this kernel
  const int num_groups = *p.groups.num_groups;
  for (int grp = 0; grp < num_groups; ++grp) {
    const int64_t e = p.groups.expert[grp];
    const bf16_t* gate = p.gate_up + (e * 2 * p.I + j) * p.H;
    const bf16_t* const w[kRowsPerWarp] = {gate, gate + p.I * p.H};
    const int end = p.groups.begin[grp + 1];
    for (int row0 = p.groups.begin[grp]; row0 < end; row0 += kTokens) {
      const int n = end - row0 < kTokens ? end - row0 : kTokens;
      const bf16_t* a[kTokens];
#pragma unroll
      for (int t = 0; t < kTokens; ++t)
        a[t] = p.x + static_cast<int64_t>(p.groups.row_token[row0 + (t < n ? t : 0)]) * p.H;
      float acc[kRowsPerWarp][kTokens];
      lane_dots<kVec, kGateUpUnroll>(w, a, n, p.H, lane, acc);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= n) break;
        const float g = __bfloat162float(__float2bfloat16_rn(warp_total(acc[0][t])));
        const float u = __bfloat162float(__float2bfloat16_rn(warp_total(acc[1][t])));
        if (lane == t)
          p.act[(row0 + t) * p.I + j] = __float2bfloat16_rn(__fmul_rn(torch_exp::siluf(g), u));
      }
    }
  }
}

struct DownArgs {
  const bf16_t* act;   // [rows, I] grouped rows
  const bf16_t* down;  // [E, H, I]
  Groups groups;
  const float* weights;  // [T, top_k]
  int64_t T, H, I;
  int top_k;
  bf16_t* out;  // [T, H]
};

// Grid: x = ceil(H / kOutColsPerBlock). Warp w computes output columns h0 + 2 w and h0 + 2 w + 1
// of every grouped row (y = bf16(act · down_e row h)) into shared memory; then the block combines
// its columns per token: out[t, h] = bf16(Σ_k fma(w_k, y[entry_of[t, k], h], acc)) in k order.
template <int kVec>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) down_combine_kernel(DownArgs p) {
  __shared__ float y[kMaxRows][kOutColsPerBlock];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * kOutColsPerBlock;
  const int col = warp * kRowsPerWarp;  // first of the warp's columns within the block
  const int64_t h = h0 + col;
  const int num_groups = *p.groups.num_groups;
  for (int grp = 0; grp < num_groups && h < p.H; ++grp) {
    const int64_t e = p.groups.expert[grp];
    const bf16_t* w_e = p.down + e * p.H * p.I;
    // A column past H reuses row h (computed, never stored).
    const bf16_t* const w[kRowsPerWarp] = {w_e + h * p.I, w_e + (h + 1 < p.H ? h + 1 : h) * p.I};
    const int end = p.groups.begin[grp + 1];
    for (int row0 = p.groups.begin[grp]; row0 < end; row0 += kTokens) {
      const int n = end - row0 < kTokens ? end - row0 : kTokens;
      const bf16_t* a[kTokens];
#pragma unroll
      for (int t = 0; t < kTokens; ++t) a[t] = p.act + (row0 + (t < n ? t : 0)) * p.I;
      float acc[kRowsPerWarp][kTokens];
      lane_dots<kVec, kDownUnroll>(w, a, n, p.I, lane, acc);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= n) break;
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          const float v = __bfloat162float(__float2bfloat16_rn(warp_total(acc[r][t])));
          if (lane == t) y[row0 + t][col + r] = v;
        }
      }
    }
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < p.T * kOutColsPerBlock; i += kThreads) {
    const int64_t t = i / kOutColsPerBlock;
    const int c = static_cast<int>(i % kOutColsPerBlock);
    if (h0 + c >= p.H) continue;
    float acc = 0.0f;
    for (int k = 0; k < p.top_k; ++k)
      acc = __fmaf_rn(p.weights[t * p.top_k + k], y[p.groups.entry_of[t * p.top_k + k]][c], acc);
    p.out[t * p.H + h0 + c] = __float2bfloat16_rn(acc);
  }
}

}  // namespace beam::cuda::moe_small
