// Device side of the tensor-core prefill attention (kernels/cuda/attention.cu): a FlashAttention-2
// style kernel for head_dim 128 on sm_90a with mma.sync m16n8k16 (bf16 inputs, fp32 accumulation).
// One CTA (4 warps x 32 rows, two m16 tiles per warp) serves 128 query rows of one sequence and
// one q head; 64-key K/V tiles of the head's KV head stream through a two-stage cp.async pipeline
// (one __syncthreads per tile) into XOR-swizzled shared memory read by ldmatrix (.trans for V).
// A CTA only loads the key tiles some row of it can see (causal future and keys slid out of the
// window are skipped), each warp only computes the tiles its own 32 rows can see, and per-key
// masks are applied only on tiles that cut some row's visible range. The grid runs the q heads of
// one row tile side by side (the G q heads of a KV head share its K/V tiles through L2) and the
// row tiles heaviest first (the host lists a sequence's tiles last-first).
//
// Numerics: s = fp32(q·k); p = exp2(s * scale * log2(e) - max * scale * log2(e)) (ex2.approx, the
// CPU's exp(s * scale - max) to fp32 rounding), fp32 online softmax per 64-key tile, P fed to the
// P·V mma as bf16 hi + bf16 lo (P - hi), so P is carried to ~2^-17 relative (kernels/cpu/
// attention.cpp keeps P in fp32: no bf16 rounding point the reference lacks), out = bf16(o / l)
// (one rounding, as the CPU). A row's result depends only on its own q, its visible keys and the
// fixed 64-slot key-tile grid: tiles it cannot see leave its state unchanged, so neither the
// other rows of its tile nor the batch move its bits.
#pragma once

#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention_kernels.cuh"

namespace beam::cuda::attention_detail {

constexpr int kPrefillRows = 128;    // query rows per CTA
constexpr int kPrefillWarps = 4;     // 32 rows (two m16 tiles) per warp
constexpr int kPrefillWarpRows = kPrefillRows / kPrefillWarps;
constexpr int kPrefillKeys = 64;     // keys per K/V tile
constexpr int kPrefillDim = 128;     // the head_dim this kernel serves
constexpr int kPrefillMinRows = 64;  // sequences with at least this many query rows use it
constexpr int kPrefillThreads = kPrefillWarps * 32;

// A tile of query rows [row0, row0 + rows) of sequence seq (rows <= kPrefillRows).
struct PrefillItem {
  int32_t seq, row0, rows, pad;
};

// Shared memory: the Q tile, then two stages of (K tile, V tile); bf16 rows of 128 elements whose
// 16-byte chunks are XOR-swizzled by (row & 7), so ldmatrix and cp.async are conflict-free.
// 96 KB: two CTAs per SM.
constexpr int kPrefillQElems = kPrefillRows * kPrefillDim;
constexpr int kPrefillTileElems = kPrefillKeys * kPrefillDim;
constexpr size_t kPrefillSmemBytes =
    sizeof(__nv_bfloat16) * (kPrefillQElems + 4 * kPrefillTileElems);
constexpr float kLog2e = 1.4426950408889634f;

// Byte offset of 16-byte chunk `chunk` of row `row` of a tile.
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return static_cast<uint32_t>(row * kPrefillDim * 2 + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
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

// 2^x (ex2.approx: -inf gives +0).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Logical slots [lo, hi] visible to the query whose own slot is `self` (slots of one sequence fit
// int32: 2^31 slots of one KV head alone would take 1 TB). window <= 0: full attention.
struct PrefillRange {
  int lo, hi;
};
__device__ __forceinline__ PrefillRange prefill_visible(int self, int window) {
  return {window > 0 ? max(0, self - window + 1) : 0, self};
}

// Queues the K and V rows of keys [t0, t0 + 64) of KV head kvh into one stage: thread t copies
// 16-byte chunk t % 16 of keys t / 16 + 8i. Keys outside [lo, hi] or in an unmapped block are
// zero-filled and never read. bs_shift = log2(block_size), or -1 when it is no power of two.
__device__ __forceinline__ void prefill_load_kv(const Params& p, const int32_t* table, int kvh,
                                                int bs_shift, int t0, int lo, int hi,
                                                uint32_t k_s, uint32_t v_s) {
  const int c = threadIdx.x % 16;
#pragma unroll
  for (int i = 0; i < kPrefillKeys / 8; ++i) {
    const int j = threadIdx.x / 16 + 8 * i;
    const int key = t0 + j;
    int64_t src = 0;
    int bytes = 0;
    if (key >= lo && key <= hi) {
      const int logical = bs_shift >= 0 ? key >> bs_shift : key / static_cast<int>(p.block_size);
      const int64_t block = table[logical];
      if (block >= 0 && block < p.num_blocks) {
        const int64_t slot = block * p.block_size + (key - logical * static_cast<int>(p.block_size));
        src = (slot * p.num_kv_heads + kvh) * kPrefillDim + c * 8;
        bytes = 16;
      }
    }
    cp_async16(k_s + swz(j, c), p.k_cache + src, bytes);
    cp_async16(v_s + swz(j, c), p.v_cache + src, bytes);
  }
}

// Queues the Q rows of the item (q head h) into q_s; rows past the item are zero-filled.
__device__ __forceinline__ void prefill_load_q(const Params& p, const SeqDesc& s,
                                               const PrefillItem& it, int h, uint32_t q_s) {
  const int c = threadIdx.x % 16;
#pragma unroll
  for (int i = 0; i < kPrefillRows / 8; ++i) {
    const int r = threadIdx.x / 16 + 8 * i;
    const bool live = r < it.rows;
    const int64_t t = s.q_begin + it.row0 + r;
    const int64_t src = live ? (t * p.num_heads + h) * kPrefillDim + c * 8 : 0;
    cp_async16(q_s + swz(r, c), p.q + src, live ? 16 : 0);
  }
}

// Per-warp state of 32 query rows: this thread holds rows 16 * mt + lane / 4 + 8 * half of the
// warp, state index i = 2 * mt + half; l is the sum over this thread's keys only (the quad's
// partial sums are added at the end).
struct PrefillState {
  float o[2][kPrefillDim / 8][4];  // [m-tile][n-tile of 8 dims][c0..c3]
  float m[4], l[4];
};

// S = Q K^T for the warp's 32 rows (Q fragments from q_s) and the stage's 64 keys:
// s[m-tile][n-tile of 8 keys][c0..c3].
__device__ __forceinline__ void prefill_scores(uint32_t q_s, int warp_row0, uint32_t k_s,
                                               float (&s)[2][kPrefillKeys / 8][4]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int n = 0; n < kPrefillKeys / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
  }
#pragma unroll
  for (int kk = 0; kk < kPrefillDim / 16; ++kk) {
    uint32_t a[2][4];  // rows 16 * mt + 0-15 x dims kk*16 + (0-7 | 8-15)
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
      ldmatrix_x4(a[mt], q_s + swz(warp_row0 + 16 * mt + lane % 16, kk * 2 + lane / 16));
#pragma unroll
    for (int n = 0; n < kPrefillKeys / 16; ++n) {
      // matrices: keys n*16 + (0-7 | 8-15) x dims kk*16 + (0-7 | 8-15)
      const int i = lane / 8, key = n * 16 + lane % 8 + (i / 2) * 8, chunk = kk * 2 + i % 2;
      uint32_t b[4];
      ldmatrix_x4(b, k_s + swz(key, chunk));
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        mma_bf16(s[mt][2 * n], a[mt], b[0], b[1]);
        mma_bf16(s[mt][2 * n + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// Online-softmax step for one 64-key tile at slot t0: masks s (raw scores) where `mask`, replaces
// it by probabilities and rescales the state. row_self0: own slot of the warp's first row.
__device__ __forceinline__ void prefill_softmax(const Params& p, int window, int row_self0, int t0,
                                                bool mask, float (&sc)[2][kPrefillKeys / 8][4],
                                                PrefillState& st) {
  const int lane = threadIdx.x % 32;
  const float c = p.scale * kLog2e;
  float alpha[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int mt = i / 2, half = i % 2;
    if (mask) {  // keys t0 + [lo_r, hi_r] are visible to this row
      const PrefillRange vis = prefill_visible(row_self0 + 16 * mt + lane / 4 + 8 * half, window);
      const int lo_r = vis.lo - t0, hi_r = vis.hi - t0;
#pragma unroll
      for (int n = 0; n < kPrefillKeys / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = n * 8 + 2 * (lane % 4) + e;
          if (key < lo_r || key > hi_r) sc[mt][n][2 * half + e] = -INFINITY;
        }
      }
    }
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < kPrefillKeys / 8; ++n)
      mx = fmaxf(mx, fmaxf(sc[mt][n][2 * half], sc[mt][n][2 * half + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(st.m[i], mx);
    const float m_scaled = (m_new == -INFINITY ? 0.f : m_new) * c;  // a row with no key yet
    // 0 on the first visible tile; exactly 1 (ex2(0)) when the max did not move, so a tile the
    // row cannot see leaves its state unchanged.
    alpha[i] = exp2_approx((st.m[i] - (m_new == -INFINITY ? 0.f : m_new)) * c);
    st.m[i] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < kPrefillKeys / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& v = sc[mt][n][2 * half + e];
        v = exp2_approx(fmaf(v, c, -m_scaled));
        sum += v;
      }
    }
    st.l[i] = st.l[i] * alpha[i] + sum;
  }
  // o *= alpha (a warp-uniform skip when every alpha is 1 made ptxas spill in the loop).
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int d = 0; d < kPrefillDim / 8; ++d) {
      st.o[mt][d][0] *= alpha[2 * mt];
      st.o[mt][d][1] *= alpha[2 * mt];
      st.o[mt][d][2] *= alpha[2 * mt + 1];
      st.o[mt][d][3] *= alpha[2 * mt + 1];
    }
  }
}

// o += P·V for the warp's 32 rows and the stage's 64 keys, P (fp32 in sc) as bf16 hi + bf16 lo.
__device__ __forceinline__ void prefill_pv(const float (&sc)[2][kPrefillKeys / 8][4],
                                           uint32_t v_s, PrefillState& st) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < kPrefillKeys / 16; ++kk) {  // keys kk*16 .. +15
    uint32_t hi[2][4], lo[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {  // a0: (row, keys 0-7) a1: (row+8, 0-7) a2: (row, 8-15) a3
        const float* c = &sc[mt][2 * kk + r / 2][2 * (r % 2)];
        hi[mt][r] = pack_bf16(c[0], c[1]);
        const __nv_bfloat162 h2 = *reinterpret_cast<const __nv_bfloat162*>(&hi[mt][r]);
        lo[mt][r] = pack_bf16(c[0] - __low2float(h2), c[1] - __high2float(h2));
      }
    }
#pragma unroll
    for (int d = 0; d < kPrefillDim / 16; ++d) {
      // matrices: keys kk*16 + (0-7 | 8-15) x dims d*16 + (0-7 | 8-15), transposed
      const int i = lane / 8, key = kk * 16 + lane % 8 + (i % 2) * 8, chunk = d * 2 + i / 2;
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_s + swz(key, chunk));
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        mma_bf16(st.o[mt][2 * d], hi[mt], b[0], b[1]);
        mma_bf16(st.o[mt][2 * d + 1], hi[mt], b[2], b[3]);
        mma_bf16(st.o[mt][2 * d], lo[mt], b[0], b[1]);
        mma_bf16(st.o[mt][2 * d + 1], lo[mt], b[2], b[3]);
      }
    }
  }
}

// Writes out = bf16(o / l) for the warp's live rows (l summed over the quad first).
__device__ __forceinline__ void prefill_write(const Params& p, const SeqDesc& s,
                                              const PrefillItem& it, int h, int warp_row0,
                                              PrefillState& st) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    st.l[i] += __shfl_xor_sync(0xffffffffu, st.l[i], 1);
    st.l[i] += __shfl_xor_sync(0xffffffffu, st.l[i], 2);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int mt = i / 2, half = i % 2;
    const int r = warp_row0 + 16 * mt + lane / 4 + 8 * half;
    if (r >= it.rows) continue;
    const float l = st.l[i];
    const int64_t t = s.q_begin + it.row0 + r;
    __nv_bfloat16* dst = p.out + (t * p.num_heads + h) * kPrefillDim + 2 * (lane % 4);
#pragma unroll
    for (int d = 0; d < kPrefillDim / 8; ++d) {
      *reinterpret_cast<__nv_bfloat162*>(dst + d * 8) = __floats2bfloat162_rn(
          __fdiv_rn(st.o[mt][d][2 * half], l), __fdiv_rn(st.o[mt][d][2 * half + 1], l));
    }
  }
}

// grid (prefill items x Nq): CTA b serves item b / Nq for q head b % Nq (heads of one row tile
// side by side). kPrefillThreads threads, kPrefillSmemBytes dynamic shared memory.
__global__ void __launch_bounds__(kPrefillThreads, 2)
    prefill_kernel(Params p, const PrefillItem* items, int bs_shift) {
  extern __shared__ uint4 prefill_smem[];
  const uint32_t q_s = smem_u32(prefill_smem);
  const uint32_t kv_s = q_s + 2 * kPrefillQElems;  // stage b: K at tile 2b, V at tile 2b + 1
  constexpr uint32_t kTileBytes = 2 * kPrefillTileElems;
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.num_heads));
  const PrefillItem it = items[blockIdx.x / static_cast<unsigned>(p.num_heads)];
  const SeqDesc s = p.seqs[it.seq];
  const int32_t* table = p.tables + s.table_offset;
  const int warp = threadIdx.x / 32;
  // A window wider than any int32 slot range is full attention.
  const int window = p.window > 0 && p.window <= INT32_MAX ? static_cast<int>(p.window) : 0;
  const int self0 = static_cast<int>(s.q_pos0 + it.row0 - s.kv_pos0);  // own slot of row 0
  // Keys of the CTA: [lo, hi], in tiles from first_tile.
  const int lo = prefill_visible(self0, window).lo, hi = self0 + it.rows - 1;
  const int first_tile = lo / kPrefillKeys * kPrefillKeys;
  const int num_tiles = (hi - first_tile) / kPrefillKeys + 1;
  // The warp's live rows see keys [w_first.lo, w_last.hi]; all of them see [w_last.lo, w_first.hi].
  const int warp_row0 = warp * kPrefillWarpRows;
  const bool warp_live = warp_row0 < it.rows;
  const PrefillRange w_first = prefill_visible(self0 + warp_row0, window);
  const PrefillRange w_last =
      prefill_visible(self0 + min(warp_row0 + kPrefillWarpRows, it.rows) - 1, window);

  prefill_load_q(p, s, it, h, q_s);
  prefill_load_kv(p, table, h / p.group, bs_shift, first_tile, lo, hi, kv_s, kv_s + kTileBytes);
  cp_async_commit();

  PrefillState st;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int d = 0; d < kPrefillDim / 8; ++d)
      st.o[mt][d][0] = st.o[mt][d][1] = st.o[mt][d][2] = st.o[mt][d][3] = 0.f;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    st.m[i] = -INFINITY;
    st.l[i] = 0.f;
  }

  for (int tile = 0; tile < num_tiles; ++tile) {
    // Tile `tile` has landed for every thread, and every warp is done with the other stage
    // (read in the previous iteration), which the next tile's copies now refill.
    cp_async_wait<0>();
    __syncthreads();
    const int t0 = first_tile + tile * kPrefillKeys;
    if (tile + 1 < num_tiles) {
      const uint32_t next = kv_s + ((tile + 1) % 2) * 2 * kTileBytes;
      prefill_load_kv(p, table, h / p.group, bs_shift, t0 + kPrefillKeys, lo, hi, next,
                      next + kTileBytes);
      cp_async_commit();
    }
    if (!warp_live || t0 > w_last.hi || t0 + kPrefillKeys - 1 < w_first.lo) continue;
    const bool mask = t0 + kPrefillKeys - 1 > w_first.hi || t0 < w_last.lo;
    const uint32_t k_s = kv_s + (tile % 2) * 2 * kTileBytes;
    float sc[2][kPrefillKeys / 8][4];
    prefill_scores(q_s, warp_row0, k_s, sc);
    prefill_softmax(p, window, self0 + warp_row0, t0, mask, sc, st);
    prefill_pv(sc, k_s + kTileBytes, st);
  }
  if (warp_live) prefill_write(p, s, it, h, warp_row0, st);
}

}  // namespace beam::cuda::attention_detail
