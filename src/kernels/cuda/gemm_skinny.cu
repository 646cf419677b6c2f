// Weight-streaming skinny GEMM for linear() at small M: out[M, N] = x[M, K] · w[N, K]ᵀ with bf16
// x and w, fp32 accumulation and one rounding to out (bf16 or f32). At small M a linear layer is
// bound by reading w once, so each warp owns groups of kRows rows of w, streams them with 16-byte
// non-allocating loads (kUnroll chunks per row in flight) and multiplies each chunk by all M rows
// of x (read through L1, where the few KB of x stay resident). It accepts M <= 16, but from M = 2
// the multiplies outweigh the stream and cuBLASLt is faster on the H200, so linear() sends it
// M = 1 only (gemm.h: kSkinnyDispatchRows; cuda_kernels_bench's BM_linear compares the two).
// linear_split's outputs are consecutive row ranges of w: one launch covers them all, each row
// stored into its own output.
//
// Work split: the grid is sized from the instance's occupancy so that every warp is resident from
// the start (one wave) and owns the same number of consecutive row groups (the last warp fewer);
// only w matrices of more than kMaxGroupsPerWarp waves (the LM head) fall back to one group per
// warp and the hardware's dynamic CTA scheduling.
//
// Reduction order of out[m, n] — fixed, and the same for every M, rows-per-warp choice, work split,
// output split and operand alignment, so a row's result never depends on the batch (batch
// invariance) or on how w is split: K is cut into chunks of 8 elements; chunk c belongs to lane
// c % 32, which sums its chunks in ascending c and, inside a chunk, k ascending, with fmaf into
// one fp32 accumulator; the 32 lane sums are then combined by the xor butterfly 16, 8, 4, 2, 1
// and lane 0's value is rounded once and stored.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "kernels/api/gemm.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm.h"

namespace beam::cuda {
namespace {

constexpr int kWarps = 4;    // warps per CTA (128 threads): small CTAs spread evenly over SMs
constexpr int kChunk = 8;    // bf16 elements per 16-byte chunk
constexpr int kUnroll = 4;   // chunks per row a lane loads before multiplying (loads in flight)
constexpr int64_t kMaxGroupsPerWarp = 4;  // past this many row groups per resident warp: dynamic
constexpr int kMaxSplits = static_cast<int>(kMaxLinearSplits);

// Where each row of w goes: rows [end[i-1], end[i]) of w are the columns of out[i] ([M, width_i],
// row-major, width_i = end[i] - end[i-1], end[-1] = 0). Passed by value (kernel parameter).
template <typename Out>
struct SplitOut {
  Out* out[kMaxSplits];
  int64_t end[kMaxSplits];
  int count;
};

// Row `row` of w is column `col` of output `out` ([M, width] row-major).
template <typename Out>
struct RowOutput {
  Out* column;    // &out[0, col]
  int64_t width;  // the row stride of out
};

// Finds row's output with a select chain over the outputs (no dynamic parameter indexing).
template <typename Out>
__device__ __forceinline__ RowOutput<Out> row_output(const SplitOut<Out>& split, int64_t row) {
  Out* base = split.out[0];
  int64_t begin = 0, width = split.end[0];
#pragma unroll
  for (int i = 1; i < kMaxSplits; ++i) {
    if (i < split.count && row >= split.end[i - 1]) {
      base = split.out[i];
      begin = split.end[i - 1];
      width = split.end[i] - begin;
    }
  }
  return {base + (row - begin), width};
}

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

// One warp computes rows [row0, row0 + kRows) of w (rows past N are clamped for loading and not
// stored) against the M <= kMaxM rows of x, in the order of the file comment.
template <int kMaxM, int kRows, bool kVec, typename Out>
__device__ __forceinline__ void row_group(const __nv_bfloat16* __restrict__ x,
                                          const __nv_bfloat16* __restrict__ w,
                                          const SplitOut<Out>& split, int M, int64_t N, int64_t K,
                                          int64_t row0, int lane) {
  const int64_t chunks = (K + kChunk - 1) / kChunk;
  const __nv_bfloat16* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = w + (row0 + r < N ? row0 + r : N - 1) * K;
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
    const RowOutput<Out> dst = row_output(split, row0 + r);
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0 && m < M && row0 + r < N) store(v, dst.column + m * dst.width);
    }
  }
}

// Warp g of the grid computes row groups [g * groups_per_warp, (g + 1) * groups_per_warp) of
// kRows rows each (clipped to N). x [M, K], w [N, K], M <= kMaxM.
template <int kMaxM, int kRows, bool kVec, typename Out>
__global__ void __launch_bounds__(kWarps * 32)
    skinny_gemm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                       SplitOut<Out> split, int M, int64_t N, int64_t K, int64_t groups_per_warp) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t warp = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  const int64_t groups = (N + kRows - 1) / kRows;
  const int64_t first = warp * groups_per_warp;
  const int64_t last = first + groups_per_warp < groups ? first + groups_per_warp : groups;
  for (int64_t g = first; g < last; ++g)  // uniform across the warp
    row_group<kMaxM, kRows, kVec, Out>(x, w, split, M, N, K, g * kRows, lane);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Resident CTAs per SM of one kernel instance, asked once per context.
int ctas_per_sm(CudaContext& ctx, const void* kernel) {
  auto it = ctx.linear.skinny_ctas_per_sm.find(kernel);
  if (it != ctx.linear.skinny_ctas_per_sm.end()) return it->second;
  int n = 0;
  CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kWarps * 32, 0));
  n = std::max(n, 1);
  ctx.linear.skinny_ctas_per_sm.emplace(kernel, n);
  return n;
}

template <int kMaxM, int kRows, bool kVec, typename Out>
void launch(CudaContext& ctx, const TensorView& x, const TensorView& w,
            const SplitOut<Out>& split) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  const auto kernel = skinny_gemm_kernel<kMaxM, kRows, kVec, Out>;
  const int64_t groups = ceil_div(N, kRows);
  const int64_t resident_warps = int64_t{ctas_per_sm(ctx, reinterpret_cast<const void*>(kernel))} *
                                 ctx.props.multiProcessorCount * kWarps;
  const int64_t per_warp =
      groups <= kMaxGroupsPerWarp * resident_warps ? ceil_div(groups, resident_warps) : 1;
  const int64_t blocks = ceil_div(ceil_div(groups, per_warp), kWarps);
  kernel<<<static_cast<unsigned>(blocks), kWarps * 32, 0, ctx.stream>>>(
      static_cast<const __nv_bfloat16*>(x.data), static_cast<const __nv_bfloat16*>(w.data), split,
      static_cast<int>(M), N, K, per_warp);
  CUDA_LAUNCH_OK();
}

// Picks the instance: kMaxM the smallest of 1, 2, 4, 8, 16 holding M.
template <int kRows, bool kVec, typename Out>
void launch_rows(CudaContext& ctx, const TensorView& x, const TensorView& w,
                 const SplitOut<Out>& split) {
  const int64_t M = x.dim(0);
  if (M <= 1) return launch<1, kRows, kVec, Out>(ctx, x, w, split);
  if (M <= 2) return launch<2, kRows, kVec, Out>(ctx, x, w, split);
  if (M <= 4) return launch<4, kRows, kVec, Out>(ctx, x, w, split);
  if (M <= 8) return launch<8, kRows, kVec, Out>(ctx, x, w, split);
  return launch<16, kRows, kVec, Out>(ctx, x, w, split);
}

// Vector loads when every row is 16-byte aligned; two rows per warp there (half the x reads from
// L1 per weight byte), one on the element-load fallback.
template <typename Out>
void launch_out(CudaContext& ctx, const TensorView& x, const TensorView& w,
                std::span<const TensorView> outs) {
  SplitOut<Out> split{};
  int64_t end = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    end += outs[i].dim(1);
    split.out[i] = static_cast<Out*>(outs[i].data);
    split.end[i] = end;
  }
  split.count = static_cast<int>(outs.size());
  BEAM_CHECK(end == w.dim(0)) << "linear_skinny: outputs take " << end << " rows of w "
                              << w.shape.str();
  const int64_t K = x.dim(1);
  const bool vec = K % kChunk == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
  if (vec) return launch_rows<2, true, Out>(ctx, x, w, split);
  launch_rows<1, false, Out>(ctx, x, w, split);
}

}  // namespace

void linear_skinny(CudaContext& ctx, const TensorView& x, const TensorView& w,
                   const TensorView& out) {
  linear_skinny_split(ctx, x, w, std::span<const TensorView>(&out, 1));
}

void linear_skinny_split(CudaContext& ctx, const TensorView& x, const TensorView& w,
                         std::span<const TensorView> outs) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  BEAM_CHECK(!outs.empty() && outs.size() <= kMaxLinearSplits)
      << "linear_skinny: " << outs.size() << " outputs";
  const DType out_dtype = outs.front().dtype;
  BEAM_CHECK(x.dtype == DType::kBF16 && w.dtype == DType::kBF16 &&
             (out_dtype == DType::kBF16 || out_dtype == DType::kF32))
      << "linear_skinny: needs (x, w, out) = (bf16, bf16, bf16|f32), got (" << dtype_name(x.dtype)
      << ", " << dtype_name(w.dtype) << ", " << dtype_name(out_dtype) << ")";
  BEAM_CHECK(M <= kSkinnyMaxRows) << "linear_skinny: M " << M << " > " << kSkinnyMaxRows;
  for (const TensorView& out : outs)
    BEAM_CHECK(out.dtype == out_dtype && out.dim(0) == M) << "linear_skinny: out " << out.shape.str();
  if (M == 0 || N == 0) return;
  if (K == 0) {  // the empty sum is 0
    for (const TensorView& out : outs)
      CUDA_OK(cudaMemsetAsync(out.data, 0, out.nbytes(), ctx.stream));
    return;
  }
  if (out_dtype == DType::kBF16) return launch_out<__nv_bfloat16>(ctx, x, w, outs);
  launch_out<float>(ctx, x, w, outs);
}

}  // namespace beam::cuda
