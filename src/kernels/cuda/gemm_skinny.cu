// Weight-streaming skinny GEMM for linear() at small M: out[M, N] = x[M, K] · w[N, K]ᵀ with bf16
// x and w, fp32 accumulation and one rounding to out (bf16 or f32). At M <= 16 a linear layer is
// bound by reading w once, so each warp owns kRows rows of w, streams them with 16-byte
// non-allocating loads (kUnroll chunks per row in flight) and multiplies each chunk by all M rows
// of x (read through L1, where the few KB of x stay resident).
//
// Reduction order of out[m, n] — fixed, and the same for every M, rows-per-warp choice and operand
// alignment, so a row's result never depends on the batch (batch invariance): K is cut into
// chunks of 8 elements; chunk c belongs to lane c % 32, which sums its chunks in ascending c and,
// inside a chunk, k ascending, with fmaf into one fp32 accumulator; the 32 lane sums are then
// combined by the xor butterfly 16, 8, 4, 2, 1 and lane 0's value is rounded once and stored.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm.h"

namespace beam::cuda {
namespace {

constexpr int kWarps = 4;    // warps per CTA (128 threads): small CTAs spread evenly over SMs
constexpr int kChunk = 8;    // bf16 elements per 16-byte chunk
constexpr int kUnroll = 4;   // chunks per row a lane loads before multiplying (loads in flight)

// 16 bytes of w that are read exactly once: bypass L1 so x stays resident there.
__device__ __forceinline__ uint4 load_stream(const __nv_bfloat16* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Chunk c of a row of K bf16 (zero-padded past K). kVec: rows are 16-byte aligned and K % 8 == 0,
// so the chunk is one vector load; otherwise element loads (same values, same order).
template <bool kVec, bool kStream>
__device__ __forceinline__ uint4 load_chunk(const __nv_bfloat16* row, int64_t c, int64_t K) {
  if constexpr (kVec) {
    if constexpr (kStream) return load_stream(row + c * kChunk);
    return __ldg(reinterpret_cast<const uint4*>(row + c * kChunk));
  } else {
    const auto* bits = reinterpret_cast<const unsigned short*>(row);
    uint32_t h[kChunk];
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const int64_t k = c * kChunk + j;
      h[j] = k < K ? uint32_t{__ldg(bits + k)} : 0u;
    }
    return uint4{h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16};
  }
}

// The 8 bf16 of a chunk widened (exactly) to fp32, element j at f[j].
__device__ __forceinline__ void widen(const uint4& v, float f[kChunk]) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(u[i] << 16);
    f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ void store(float v, __nv_bfloat16* p) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(float v, float* p) { *p = v; }

// One warp per kRows consecutive rows of w; M <= kMaxM rows of x. x [M, K], w [N, K], out [M, N].
template <int kMaxM, int kRows, bool kVec, typename Out>
__global__ void __launch_bounds__(kWarps * 32)
    skinny_gemm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                       Out* __restrict__ out, int M, int64_t N, int64_t K) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row0 = (int64_t{blockIdx.x} * kWarps + threadIdx.x / 32) * kRows;
  if (row0 >= N) return;  // the whole warp leaves together
  const int64_t chunks = (K + kChunk - 1) / kChunk;
  const __nv_bfloat16* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = w + (row0 + r < N ? row0 + r : N - 1) * K;  // clamped: not stored
  float acc[kRows][kMaxM];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) acc[r][m] = 0.0f;

  for (int64_t base = lane; base < chunks; base += 32 * kUnroll) {
    uint4 wv[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        wv[u][r] = base + 32 * u < chunks ? load_chunk<kVec, true>(wrow[r], base + 32 * u, K)
                                          : uint4{0, 0, 0, 0};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + 32 * u;
      if (c >= chunks) break;
      float wf[kRows][kChunk];
#pragma unroll
      for (int r = 0; r < kRows; ++r) widen(wv[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < kMaxM; ++m) {
        if (m >= M) break;
        float xf[kChunk];
        widen(load_chunk<kVec, false>(x + m * K, c, K), xf);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int j = 0; j < kChunk; ++j) acc[r][m] = fmaf(wf[r][j], xf[j], acc[r][m]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0 && m < M && row0 + r < N) store(v, out + m * N + row0 + r);
    }
  }
}

template <int kMaxM, int kRows, bool kVec, typename Out>
void launch(CudaContext& ctx, const TensorView& x, const TensorView& w, const TensorView& out) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  const int64_t warps = (N + kRows - 1) / kRows;
  const int64_t blocks = (warps + kWarps - 1) / kWarps;
  skinny_gemm_kernel<kMaxM, kRows, kVec, Out><<<static_cast<unsigned>(blocks), kWarps * 32, 0,
                                                ctx.stream>>>(
      static_cast<const __nv_bfloat16*>(x.data), static_cast<const __nv_bfloat16*>(w.data),
      static_cast<Out*>(out.data), static_cast<int>(M), N, K);
  CUDA_LAUNCH_OK();
}

// Picks the instance: kMaxM the smallest of 1, 2, 4, 8, 16 holding M.
template <int kRows, bool kVec, typename Out>
void launch_rows(CudaContext& ctx, const TensorView& x, const TensorView& w,
                 const TensorView& out) {
  const int64_t M = x.dim(0);
  if (M <= 1) return launch<1, kRows, kVec, Out>(ctx, x, w, out);
  if (M <= 2) return launch<2, kRows, kVec, Out>(ctx, x, w, out);
  if (M <= 4) return launch<4, kRows, kVec, Out>(ctx, x, w, out);
  if (M <= 8) return launch<8, kRows, kVec, Out>(ctx, x, w, out);
  return launch<16, kRows, kVec, Out>(ctx, x, w, out);
}

template <typename Out>
void launch_out(CudaContext& ctx, const TensorView& x, const TensorView& w, const TensorView& out) {
  const int64_t K = x.dim(1), N = w.dim(0);
  const bool vec = K % kChunk == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
  if (!vec) return launch_rows<1, false, Out>(ctx, x, w, out);
  // Two rows per warp halve the x reads from L1, but only while that still leaves about 8 CTAs
  // per SM to balance the tail (N = 8448 on 132 SMs).
  const int64_t two_row_min_n = int64_t{2} * kWarps * 8 * ctx.props.multiProcessorCount;
  if (N >= two_row_min_n) return launch_rows<2, true, Out>(ctx, x, w, out);
  return launch_rows<1, true, Out>(ctx, x, w, out);
}

}  // namespace

void linear_skinny(CudaContext& ctx, const TensorView& x, const TensorView& w,
                   const TensorView& out) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  BEAM_CHECK(x.dtype == DType::kBF16 && w.dtype == DType::kBF16 &&
             (out.dtype == DType::kBF16 || out.dtype == DType::kF32))
      << "linear_skinny: needs (x, w, out) = (bf16, bf16, bf16|f32), got (" << dtype_name(x.dtype)
      << ", " << dtype_name(w.dtype) << ", " << dtype_name(out.dtype) << ")";
  BEAM_CHECK(M <= kSkinnyMaxRows) << "linear_skinny: M " << M << " > " << kSkinnyMaxRows;
  if (M == 0 || N == 0) return;
  if (K == 0) {  // the empty sum is 0
    CUDA_OK(cudaMemsetAsync(out.data, 0, out.nbytes(), ctx.stream));
    return;
  }
  if (out.dtype == DType::kBF16) return launch_out<__nv_bfloat16>(ctx, x, w, out);
  launch_out<float>(ctx, x, w, out);
}

}  // namespace beam::cuda
