// CUDA RMSNorm: fp32 sum of squares (block or warp reduction, so the order differs from the CPU's),
// fp32 normalisation and affine multiply, one bf16 rounding after the weight multiply; the fused
// post-norm residual keeps every rounding point of kernels/cpu/norm.cpp.
#include "kernels/cuda/norm.h"

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"

namespace beam::cuda {
namespace {

// Rows of at most this width get one warp each (8 rows per block); wider rows one block each.
constexpr int64_t kWarpRowMaxWidth = 1024;
constexpr int kWarpsPerBlock = 8;
constexpr int kMaxBlockThreads = 512;

// rms_norm's epilogue: out = bf16(y).
struct StoreNormalized {
  bf16_t* out;
  template <int N>
  __device__ void operator()(int64_t offset, const Pack<N>& y) const {
    store_bf16<N>(out + offset, y);
  }
};

// post_norm_residual's epilogue: residual = bf16(bf16(residual * r) + bf16(bf16(y) * c)).
struct DepthScaledResidual {
  bf16_t* residual;
  float r, c;
  template <int N>
  __device__ void operator()(int64_t offset, const Pack<N>& y) const {
    Pack<N> res = load_bf16<N>(residual + offset);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float scaled_branch = round_bf16(round_bf16(y.v[i]) * c);
      const float scaled_res = round_bf16(res.v[i] * r);
      res.v[i] = scaled_res + scaled_branch;
    }
    store_bf16<N>(residual + offset, res);
  }
};

// This thread's share (packs first, first + stride, ...) of the row's sum of squares.
template <int N>
__device__ float partial_sum_sq(const bf16_t* row, int64_t num_packs, int first, int stride) {
  float sum = 0.0f;
  for (int64_t g = first; g < num_packs; g += stride) {
    const Pack<N> p = load_bf16<N>(row + g * N);
#pragma unroll
    for (int i = 0; i < N; ++i) sum = fmaf(p.v[i], p.v[i], sum);
  }
  return sum;
}

// y = f32(x) * inv_rms * f32(w) (left to right) for this thread's packs, handed to the epilogue.
// Reads each x pack before the epilogue writes it, so out may alias x.
template <int N, typename Epilogue>
__device__ void normalize_packs(const bf16_t* x, const bf16_t* w, int64_t row, int64_t n,
                                float inv_rms, int first, int stride, const Epilogue& epilogue) {
  const int64_t num_packs = n / N;
  for (int64_t g = first; g < num_packs; g += stride) {
    const Pack<N> xp = load_bf16<N>(x + row * n + g * N);
    const Pack<N> wp = load_bf16<N>(w + g * N);
    Pack<N> y;
#pragma unroll
    for (int i = 0; i < N; ++i) y.v[i] = xp.v[i] * inv_rms * wp.v[i];
    epilogue(row * n + g * N, y);
  }
}

__device__ __forceinline__ float inv_rms_of(float sum_sq, int64_t n, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
}

// One block per row (rows wider than kWarpRowMaxWidth).
template <int N, typename Epilogue>
__global__ void rms_norm_block_rows(const bf16_t* x, const bf16_t* w, int64_t n, float eps,
                                    Epilogue epilogue) {
  const int64_t row = blockIdx.x;
  const float sum_sq =
      block_sum(partial_sum_sq<N>(x + row * n, n / N, threadIdx.x, blockDim.x));
  normalize_packs<N>(x, w, row, n, inv_rms_of(sum_sq, n, eps), threadIdx.x, blockDim.x,
                     epilogue);
}

// One warp per row, kWarpsPerBlock rows per block (per-head Q/K norms, narrow rows).
template <int N, typename Epilogue>
__global__ void rms_norm_warp_rows(const bf16_t* x, const bf16_t* w, int64_t rows, int64_t n,
                                   float eps, Epilogue epilogue) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together; no block-wide barrier follows
  const int lane = threadIdx.x % 32;
  const float sum_sq = warp_sum(partial_sum_sq<N>(x + row * n, n / N, lane, 32));
  normalize_packs<N>(x, w, row, n, inv_rms_of(sum_sq, n, eps), lane, 32, epilogue);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <int N, typename Epilogue>
void launch_rows(CudaContext& ctx, const bf16_t* x, const bf16_t* w, int64_t rows, int64_t n,
                 float eps, const Epilogue& epilogue) {
  if (n <= kWarpRowMaxWidth) {
    const int64_t blocks = ceil_div(rows, kWarpsPerBlock);
    rms_norm_warp_rows<N><<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, ctx.stream>>>(
        x, w, rows, n, eps, epilogue);
  } else {
    // Balance the packs over at most kMaxBlockThreads threads (5120 wide: 320 threads x 2 packs).
    const int64_t num_packs = n / N, per_thread = ceil_div(num_packs, kMaxBlockThreads);
    const int threads = static_cast<int>(ceil_div(ceil_div(num_packs, per_thread), 32) * 32);
    rms_norm_block_rows<N><<<static_cast<unsigned>(rows), threads, 0, ctx.stream>>>(x, w, n, eps,
                                                                                  epilogue);
  }
  CUDA_LAUNCH_OK();
}

template <typename Epilogue>
void launch_norm(CudaContext& ctx, const TensorView& x, const TensorView& w, float eps,
                 bool aligned_outputs, const Epilogue& epilogue) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  if (rows == 0) return;
  const auto* xp = static_cast<const bf16_t*>(x.data);
  const auto* wp = static_cast<const bf16_t*>(w.data);
  if (n % 8 == 0 && aligned_outputs && all_aligned16(xp, wp)) {
    launch_rows<8>(ctx, xp, wp, rows, n, eps, epilogue);
  } else {
    launch_rows<1>(ctx, xp, wp, rows, n, eps, epilogue);
  }
}

}  // namespace

void rms_norm(CudaContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& out) {
  launch_norm(ctx, x, w, eps, aligned16(out.data), StoreNormalized{static_cast<bf16_t*>(out.data)});
}

void post_norm_residual(CudaContext& ctx, const TensorView& branch, const TensorView& w_post,
                        float eps, float r, float c, const TensorView& residual) {
  launch_norm(ctx, branch, w_post, eps, aligned16(residual.data),
              DepthScaledResidual{static_cast<bf16_t*>(residual.data), r, c});
}

}  // namespace beam::cuda
