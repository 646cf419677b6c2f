// CUDA ops of a tensor-parallel rank: grid-stride elementwise loops (bandwidth-bound; a decode
// step's [T, H] partials are a few KB, so one small launch each).
#include <algorithm>

#include "kernels/api/moe.h"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/shard_ops.h"

namespace beam::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(const CudaContext& ctx, int64_t n) {
  const int64_t cap = int64_t{ctx.props.multiProcessorCount} * 8;
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, cap));
}

__global__ void round_kernel(const float* src, bf16_t* dst, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = to_bf16_rn(src[i]);
}

// dst[i] = bf16(parts[0][i] + ... + parts[n - 1][i]), in rank order.
__global__ void sum_ranks_kernel(const float* parts, bf16_t* dst, int64_t n, int64_t m) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = parts[i];
    for (int64_t r = 1; r < n; ++r) acc += parts[r * m + i];
    dst[i] = to_bf16_rn(acc);
  }
}

__global__ void localize_kernel(const int32_t* ids, int32_t* local, int64_t n, int32_t first,
                                int32_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t e = ids[i];
    local[i] = e >= first && e - first < count ? e - first : kNoExpert;
  }
}

}  // namespace

void round_to_bf16(CudaContext& ctx, const TensorView& src, const TensorView& dst) {
  const int64_t n = src.numel();
  if (n == 0) return;
  round_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(static_cast<const float*>(src.data),
                                                              static_cast<bf16_t*>(dst.data), n);
  CUDA_LAUNCH_OK();
}

void sum_ranks_to_bf16(CudaContext& ctx, const TensorView& parts, const TensorView& dst) {
  const int64_t m = dst.numel();
  if (m == 0) return;
  sum_ranks_kernel<<<grid_for(ctx, m), kThreads, 0, ctx.stream>>>(
      static_cast<const float*>(parts.data), static_cast<bf16_t*>(dst.data), parts.dim(0), m);
  CUDA_LAUNCH_OK();
}

void localize_expert_ids(CudaContext& ctx, const TensorView& ids, int64_t first, int64_t count,
                         const TensorView& local) {
  const int64_t n = ids.numel();
  if (n == 0) return;
  localize_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
      ids.as<int32_t>(), local.as<int32_t>(), n, static_cast<int32_t>(first),
      static_cast<int32_t>(count));
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda
