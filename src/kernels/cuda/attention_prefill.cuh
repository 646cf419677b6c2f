// Device side of the tensor-core prefill attention (kernels/cuda/attention.cu): flash attention
// for head_dim 128 with mma.sync m16n8k16 (bf16 inputs, fp32 accumulation). One CTA (4 warps)
// serves a tile of 64 query rows of one sequence and one q head; K/V tiles of 64 keys of the q
// head's KV head stream through shared memory with cp.async double buffering; tiles no row of
// the CTA can see (causal future, slid out of the window) are never loaded.
//
// Numerics: s = fp32(q·k) * scale as kernels/cpu/attention.cpp, fp32 online softmax per 64-key
// tile (exp through ex2.approx), P fed to the P·V mma as bf16 hi + bf16 lo (P - hi), so P is
// carried to ~2^-17 relative (no bf16 rounding point the reference lacks), one bf16 rounding of
// acc / sum. A row's result depends only on its own q, its visible keys and the fixed 64-slot
// key-tile grid: never on the other rows of its tile or batch.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention_kernels.cuh"

namespace beam::cuda::attention_detail {

constexpr int kPrefillRows = 64;    // query rows per CTA (16 per warp)
constexpr int kPrefillKeys = 64;    // keys per K/V tile
constexpr int kPrefillDim = 128;    // the head_dim this kernel serves
constexpr int kPrefillWarps = 4;
constexpr int kPrefillMinRows = 64;  // sequences with at least this many query rows use it

// A tile of query rows [row0, row0 + rows) of sequence seq (rows <= kPrefillRows).
struct PrefillItem {
  int32_t seq, row0, rows, pad;
};

// Shared memory: Q tile, then two stages of (K tile, V tile); bf16, rows of 128 elements with
// their 16-byte chunks XOR-swizzled by (row & 7) so ldmatrix reads are conflict-free.
constexpr int kPrefillTileElems = kPrefillKeys * kPrefillDim;
constexpr size_t kPrefillSmemBytes = sizeof(__nv_bfloat16) * kPrefillTileElems * 5;

__device__ __forceinline__ int swz(int row, int chunk) {
  return row * kPrefillDim + ((chunk ^ (row & 7)) << 3);
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; src_bytes = 0 zero-fills the destination without reading src.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c += a (16x16 bf16, row) * b (16x8 bf16, col), fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Queues the K and V rows of keys [t0, t0 + 64) of KV head kvh into one stage; keys outside
// [lo, hi] or in an unmapped block are zero-filled and never read.
__device__ __forceinline__ void prefill_load_kv(const Params& p, const SeqDesc& s, int kvh,
                                                int64_t t0, int64_t lo, int64_t hi,
                                                __nv_bfloat16* k_s, __nv_bfloat16* v_s) {
  constexpr int kChunks = kPrefillDim / 8;
  for (int idx = threadIdx.x; idx < kPrefillKeys * kChunks; idx += kPrefillWarps * 32) {
    const int j = idx / kChunks, c = idx % kChunks;
    const int64_t key = t0 + j;
    int64_t src = 0;
    int bytes = 0;
    if (key >= lo && key <= hi) {
      const int64_t block = p.tables[s.table_offset + key / p.block_size];
      if (block >= 0 && block < p.num_blocks) {
        src = ((block * p.block_size + key % p.block_size) * p.num_kv_heads + kvh) * kPrefillDim +
              c * 8;
        bytes = 16;
      }
    }
    cp_async16(k_s + swz(j, c), p.k_cache + src, bytes);
    cp_async16(v_s + swz(j, c), p.v_cache + src, bytes);
  }
}

// Queues the Q rows of the item (q head h) into q_s; rows past the item are zero-filled.
__device__ __forceinline__ void prefill_load_q(const Params& p, const SeqDesc& s,
                                               const PrefillItem& it, int h, __nv_bfloat16* q_s) {
  constexpr int kChunks = kPrefillDim / 8;
  for (int idx = threadIdx.x; idx < kPrefillRows * kChunks; idx += kPrefillWarps * 32) {
    const int r = idx / kChunks, c = idx % kChunks;
    const int64_t t = s.q_begin + it.row0 + r;
    const bool live = r < it.rows;
    const int64_t src = live ? (t * p.num_heads + h) * kPrefillDim + c * 8 : 0;
    cp_async16(q_s + swz(r, c), p.q + src, live ? 16 : 0);
  }
}

// Per-warp state: 16 query rows; this thread holds rows lane/4 and lane/4 + 8.
struct PrefillState {
  float o[kPrefillDim / 8][4];  // O accumulators, n-tile of 8 dims x (c0..c3)
  float m[2], l[2];
};

// S = Q K^T for the warp's 16 rows and the stage's 64 keys: s[n-tile of 8 keys][c0..c3].
__device__ __forceinline__ void prefill_scores(const uint32_t (&qf)[kPrefillDim / 16][4],
                                               const __nv_bfloat16* k_s,
                                               float (&s)[kPrefillKeys / 8][4]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < kPrefillKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kPrefillDim / 16; ++kk) {
#pragma unroll
    for (int n = 0; n < kPrefillKeys / 16; ++n) {
      // matrices: keys n*16 + (0-7 | 8-15) x dims kk*16 + (0-7 | 8-15)
      const int i = lane / 8, key = n * 16 + lane % 8 + (i / 2) * 8, chunk = kk * 2 + i % 2;
      uint32_t b[4];
      ldmatrix_x4(b, k_s + swz(key, chunk));
      mma_bf16(s[2 * n], qf[kk], b[0], b[1]);
      mma_bf16(s[2 * n + 1], qf[kk], b[2], b[3]);
    }
  }
}

// Online-softmax step for one 64-key tile at t0: scales and masks s into probabilities (in
// place), rescales the state and adds P·V (P as bf16 hi + lo) from v_s.
__device__ __forceinline__ void prefill_softmax_pv(const Params& p, const SeqDesc& s,
                                                   int64_t row_pos0, int64_t t0, bool mask,
                                                   float (&sc)[kPrefillKeys / 8][4],
                                                   const __nv_bfloat16* v_s, PrefillState& st) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int half = 0; half < 2; ++half) {  // rows lane/4 (+8)
    const SlotRange vis = visible(s, row_pos0 + lane / 4 + 8 * half, p.window);
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < kPrefillKeys / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& v = sc[n][2 * half + e];
        v *= p.scale;
        const int64_t key = t0 + n * 8 + 2 * (lane % 4) + e;
        if (mask && (key < vis.lo || key > vis.hi)) v = -INFINITY;
        mx = fmaxf(mx, v);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(st.m[half], mx);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet
    const float alpha = __expf(st.m[half] - m_use);
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < kPrefillKeys / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& v = sc[n][2 * half + e];
        v = __expf(v - m_use);
        sum += v;
      }
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    st.l[half] = st.l[half] * alpha + sum;
    st.m[half] = m_new;
#pragma unroll
    for (int d = 0; d < kPrefillDim / 8; ++d) {
      st.o[d][2 * half] *= alpha;
      st.o[d][2 * half + 1] *= alpha;
    }
  }
#pragma unroll
  for (int kk = 0; kk < kPrefillKeys / 16; ++kk) {  // keys kk*16 .. +15
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // a0: (row, keys 0-7) a1: (row+8, 0-7) a2: (row, 8-15) a3
      const float* c = &sc[2 * kk + r / 2][2 * (r % 2)];
      hi[r] = pack_bf16(c[0], c[1]);
      const __nv_bfloat162 h2 = *reinterpret_cast<const __nv_bfloat162*>(&hi[r]);
      lo[r] = pack_bf16(c[0] - __low2float(h2), c[1] - __high2float(h2));
    }
#pragma unroll
    for (int d = 0; d < kPrefillDim / 16; ++d) {
      // matrices: keys kk*16 + (0-7 | 8-15) x dims d*16 + (0-7 | 8-15), transposed
      const int i = lane / 8, key = kk * 16 + lane % 8 + (i % 2) * 8, chunk = d * 2 + i / 2;
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_s + swz(key, chunk));
      mma_bf16(st.o[2 * d], hi, b[0], b[1]);
      mma_bf16(st.o[2 * d], lo, b[0], b[1]);
      mma_bf16(st.o[2 * d + 1], hi, b[2], b[3]);
      mma_bf16(st.o[2 * d + 1], lo, b[2], b[3]);
    }
  }
}

// Writes out = bf16(o / l) for the warp's live rows.
__device__ __forceinline__ void prefill_write(const Params& p, const SeqDesc& s,
                                              const PrefillItem& it, int h, int warp_row0,
                                              const PrefillState& st) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp_row0 + lane / 4 + 8 * half;
    if (r >= it.rows) continue;
    const float inv = 1.f / st.l[half];
    const int64_t t = s.q_begin + it.row0 + r;
    __nv_bfloat16* dst = p.out + (t * p.num_heads + h) * kPrefillDim + 2 * (lane % 4);
#pragma unroll
    for (int d = 0; d < kPrefillDim / 8; ++d) {
      *reinterpret_cast<__nv_bfloat162*>(dst + d * 8) = __floats2bfloat162_rn(
          st.o[d][2 * half] * inv, st.o[d][2 * half + 1] * inv);
    }
  }
}

// grid (prefill items, Nq), kPrefillWarps * 32 threads, kPrefillSmemBytes dynamic shared memory.
__global__ void __launch_bounds__(kPrefillWarps * 32) prefill_kernel(Params p,
                                                                     const PrefillItem* items) {
  extern __shared__ uint4 prefill_smem[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(prefill_smem);
  __nv_bfloat16* kv_s = q_s + kPrefillTileElems;  // stage b: K at 2b, V at 2b + 1
  const PrefillItem it = items[blockIdx.x];
  const int h = blockIdx.y, kvh = h / p.group;
  const SeqDesc s = p.seqs[it.seq];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t pos_first = s.q_pos0 + it.row0, pos_last = pos_first + it.rows - 1;
  const int64_t lo = visible(s, pos_first, p.window).lo, hi = visible(s, pos_last, p.window).hi;
  const int64_t lo_last = visible(s, pos_last, p.window).lo;
  const int64_t hi_first = visible(s, pos_first, p.window).hi;
  const int64_t first_tile = lo / kPrefillKeys * kPrefillKeys;
  const int num_tiles = static_cast<int>((hi - first_tile) / kPrefillKeys + 1);

  prefill_load_q(p, s, it, h, q_s);
  prefill_load_kv(p, s, kvh, first_tile, lo, hi, kv_s, kv_s + kPrefillTileElems);
  cp_async_commit();

  PrefillState st;
#pragma unroll
  for (int d = 0; d < kPrefillDim / 8; ++d) st.o[d][0] = st.o[d][1] = st.o[d][2] = st.o[d][3] = 0.f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;
  uint32_t qf[kPrefillDim / 16][4];
  const int warp_row0 = warp * 16;

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int64_t t0 = first_tile + int64_t{tile} * kPrefillKeys;
    if (tile + 1 < num_tiles) {
      __nv_bfloat16* next = kv_s + ((tile + 1) % 2) * 2 * kPrefillTileElems;
      prefill_load_kv(p, s, kvh, t0 + kPrefillKeys, lo, hi, next, next + kPrefillTileElems);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int kk = 0; kk < kPrefillDim / 16; ++kk)  // rows 0-15 x dims kk*16 + (0-7 | 8-15)
        ldmatrix_x4(qf[kk], q_s + swz(warp_row0 + lane % 16, kk * 2 + lane / 16));
    }
    const __nv_bfloat16* k_s = kv_s + (tile % 2) * 2 * kPrefillTileElems;
    // Per-key masks only where some row of the CTA sees part of the tile.
    const bool mask = t0 + kPrefillKeys - 1 > hi_first || t0 < lo_last;
    float sc[kPrefillKeys / 8][4];
    prefill_scores(qf, k_s, sc);
    prefill_softmax_pv(p, s, pos_first + warp_row0, t0, mask, sc, k_s + kPrefillTileElems, st);
    __syncthreads();  // the stage is refilled by the next iteration's prefetch
  }
  prefill_write(p, s, it, h, warp_row0, st);
}

}  // namespace beam::cuda::attention_detail
