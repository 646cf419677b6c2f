// Grouped bf16 GEMM of the routed experts (kernels/cuda/moe_experts.cu): for the grouped rows r of
// each expert e, out[r, :] = A[r, :] · W_e ᵀ with W_e [w_rows, K] row-major, on tensor cores
// (mma.sync m16n8k16, fp32 accumulation; 3-stage cp.async pipeline through padded shared-memory
// tiles) and one bf16 rounding per output. The SwiGLU flavour computes the gate and up columns of
// the same act column in one tile and applies the CPU's SwiGLU in the epilogue.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/torch_exp.cuh"

namespace beam::cuda::moe_gemm {

using bf16_t = __nv_bfloat16;

constexpr int kBM = 64;   // grouped rows per tile
constexpr int kBN = 128;  // weight rows per tile (SwiGLU: 64 gate + 64 up rows)
constexpr int kBK = 32;   // K per pipeline stage
constexpr int kStages = 3;
constexpr int kThreads = 256;  // 8 warps as 2 (M) x 4 (N), each 32 x 32
constexpr int kLds = kBK + 8;  // shared row stride in bf16: 80 bytes, 16-byte aligned rows and
                               // conflict-free ldmatrix (8 rows hit 8 distinct 16-byte bank groups)

enum class Epilogue {
  kStore,   // out [rows, n] = bf16(acc)
  kSwiGLU,  // W_e = [gate (n rows); up (n rows)]; out [rows, n] = bf16(silu(bf16 g) * bf16 u)
};

struct Args {
  const bf16_t* a;              // A row q starts at a + q * k
  const int32_t* a_row_of;      // grouped row -> A row q (nullptr: q is the grouped row)
  const bf16_t* w;              // [E, w_rows, k], w_rows = n (kStore) or 2 n (kSwiGLU)
  const int32_t* offsets;       // [E + 1] first grouped row of each expert
  const int32_t* tile_offsets;  // [E + 1] first M tile of each expert
  int32_t num_experts;
  int64_t n;  // output columns
  int64_t k;
  bool async_loads;  // k % 8 == 0 and a, w 16-byte aligned: 16-byte cp.async chunks
  bf16_t* out;       // [grouped rows, n]
};

// Output columns per tile.
constexpr int tile_cols(Epilogue ep) {
  return ep == Epilogue::kSwiGLU ? kBN / 2 : kBN;
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, or 16 zero bytes when !valid (src is then not read).
__device__ __forceinline__ void cp_async16(bf16_t* dst, const bf16_t* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// c += a · b for one m16n8k16 bf16 tile, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Eight elements [col, col + 8) of a row into shared memory, zeros past k or for no row.
__device__ __forceinline__ void load_chunk(bf16_t* dst, const bf16_t* row, int64_t col,
                                           const Args& p) {
  if (p.async_loads) {  // col and k are multiples of 8: the chunk is all in or all out
    const bool valid = row != nullptr && col < p.k;
    cp_async16(dst, valid ? row + col : p.w, valid);
    return;
  }
  for (int i = 0; i < 8; ++i)
    dst[i] = row != nullptr && col + i < p.k ? row[col + i] : __float2bfloat16_rn(0.0f);
}

// The expert owning M tile `tile` (< tile_offsets[E]): the last e with tile_offsets[e] <= tile,
// which has tiles (an empty expert shares its offset with the next one).
__device__ __forceinline__ int expert_of_tile(const int32_t* tile_offsets, int num_experts,
                                              int tile) {
  int lo = 0, hi = num_experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_offsets[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Weight row of shared tile row r (nullptr past n). SwiGLU: warp column wn = r / 32 holds gate
// rows then up rows of the same 16 act columns, so a thread's gate and up accumulators align.
template <Epilogue kEp>
__device__ __forceinline__ const bf16_t* weight_row(const Args& p, const bf16_t* w_e, int r,
                                                    int64_t n0) {
  if constexpr (kEp == Epilogue::kSwiGLU) {
    const int within = r % 32;
    const int64_t j = n0 + (r / 32) * 16 + within % 16;
    if (j >= p.n) return nullptr;
    return w_e + (within < 16 ? j : p.n + j) * p.k;
  } else {
    const int64_t j = n0 + r;
    return j < p.n ? w_e + j * p.k : nullptr;
  }
}

struct SharedTiles {
  bf16_t a[kStages][kBM][kLds];
  bf16_t b[kStages][kBN][kLds];
  const bf16_t* a_rows[kBM];  // A row of each tile row (nullptr past the expert's rows)
};

// acc[mi][ni] += the warp's 32 x 32 block of one kBK slice held in stage `s`.
__device__ __forceinline__ void mma_stage(const SharedTiles& sh, int s, int wm, int wn, int lane,
                                          float (&acc)[2][4][4]) {
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 16) {
    uint32_t af[2][4], bfr[4][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
      ldmatrix_x4(af[mi], &sh.a[s][wm * 32 + mi * 16 + lane % 16][kk + (lane / 16) * 8]);
#pragma unroll
    for (int nj = 0; nj < 2; ++nj) {
      uint32_t r[4];
      ldmatrix_x4(
          r, &sh.b[s][wn * 32 + nj * 16 + lane % 8 + (lane / 16) * 8][kk + ((lane / 8) % 2) * 8]);
      bfr[2 * nj][0] = r[0];
      bfr[2 * nj][1] = r[1];
      bfr[2 * nj + 1][0] = r[2];
      bfr[2 * nj + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) mma_bf16(acc[mi][ni], af[mi], bfr[ni]);
  }
}

// Stores v0 (column col) and v1 (col + 1) of one output row, within n.
__device__ __forceinline__ void store_pair(bf16_t* row, int64_t col, int64_t n, float v0,
                                           float v1) {
  if (col + 1 < n && n % 2 == 0) {
    *reinterpret_cast<__nv_bfloat162*>(row + col) = __floats2bfloat162_rn(v0, v1);
  } else {
    if (col < n) row[col] = __float2bfloat16_rn(v0);
    if (col + 1 < n) row[col + 1] = __float2bfloat16_rn(v1);
  }
}

// Rounds and stores the warp's accumulators (mma layout: c0,c1 at row lane/4, columns
// 2 (lane%4) + {0,1}; c2,c3 eight rows below).
template <Epilogue kEp>
__device__ __forceinline__ void store_tile(const Args& p, int64_t row0, int rows, int64_t n0,
                                           int wm, int wn, int lane, const float (&acc)[2][4][4]) {
  constexpr int kOutTiles = kEp == Epilogue::kSwiGLU ? 2 : 4;  // n8 tiles of output columns
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm * 32 + mi * 16 + lane / 4 + 8 * h;
      if (r >= rows) continue;
      bf16_t* out_row = p.out + (row0 + r) * p.n;
#pragma unroll
      for (int ni = 0; ni < kOutTiles; ++ni) {
        float v[2];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          if constexpr (kEp == Epilogue::kSwiGLU) {
            const float g = __bfloat162float(__float2bfloat16_rn(acc[mi][ni][2 * h + q]));
            const float u = __bfloat162float(__float2bfloat16_rn(acc[mi][ni + 2][2 * h + q]));
            v[q] = __fmul_rn(torch_exp::siluf(g), u);
          } else {
            v[q] = acc[mi][ni][2 * h + q];
          }
        }
        const int64_t col =
            n0 + wn * (kEp == Epilogue::kSwiGLU ? 16 : 32) + ni * 8 + 2 * (lane % 4);
        store_pair(out_row, col, p.n, v[0], v[1]);
      }
    }
}

// Grid: x = M tile (at least tile_offsets[E]; the rest exit), y = tile of tile_cols(kEp) columns.
template <Epilogue kEp>
__global__ void __launch_bounds__(kThreads) grouped_gemm_kernel(Args p) {
  __shared__ __align__(16) SharedTiles sh;
  const int tile = static_cast<int>(blockIdx.x);
  if (tile >= p.tile_offsets[p.num_experts]) return;
  const int e = expert_of_tile(p.tile_offsets, p.num_experts, tile);
  const int64_t row0 = p.offsets[e] + static_cast<int64_t>(tile - p.tile_offsets[e]) * kBM;
  const int64_t left = p.offsets[e + 1] - row0;
  const int rows = static_cast<int>(left < kBM ? left : kBM);
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * tile_cols(kEp);
  const int64_t w_rows = kEp == Epilogue::kSwiGLU ? 2 * p.n : p.n;
  const bf16_t* w_e = p.w + static_cast<int64_t>(e) * w_rows * p.k;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kBM) {
    const int64_t q = tid < rows ? (p.a_row_of ? p.a_row_of[row0 + tid] : row0 + tid) : -1;
    sh.a_rows[tid] = q >= 0 ? p.a + q * p.k : nullptr;
  }
  __syncthreads();

  // Loader: chunk c (8 columns) of A row tid/4 and of weight rows tid/4 and tid/4 + 64.
  const int lr = tid / 4, lc = (tid % 4) * 8;
  const bf16_t* a_row = sh.a_rows[lr];
  const bf16_t* b_row0 = weight_row<kEp>(p, w_e, lr, n0);
  const bf16_t* b_row1 = weight_row<kEp>(p, w_e, lr + 64, n0);
  auto load_stage = [&](int s, int64_t kt) {
    const int64_t col = kt * kBK + lc;
    load_chunk(&sh.a[s][lr][lc], a_row, col, p);
    load_chunk(&sh.b[s][lr][lc], b_row0, col, p);
    load_chunk(&sh.b[s][lr + 64][lc], b_row1, col, p);
  };

  const int64_t num_k = (p.k + kBK - 1) / kBK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_k) load_stage(s, s);
    cp_async_commit();
  }
  const int warp = tid / 32, lane = tid % 32, wm = warp / 4, wn = warp % 4;
  float acc[2][4][4] = {};
  for (int64_t kt = 0; kt < num_k; ++kt) {
    cp_async_wait<kStages - 2>();  // stage kt has landed (this thread's copies)
    __syncthreads();               // ... everyone's; and stage kt - 1 is no longer read
    const int64_t next = kt + kStages - 1;
    if (next < num_k) load_stage(static_cast<int>(next % kStages), next);
    cp_async_commit();
    mma_stage(sh, static_cast<int>(kt % kStages), wm, wn, lane, acc);
  }
  cp_async_wait<0>();
  store_tile<kEp>(p, row0, rows, n0, wm, wn, lane, acc);
}

}  // namespace beam::cuda::moe_gemm
