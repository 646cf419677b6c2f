// CUDA fill_random: the same counter hash and normal approximation as kernels/api/fill.cpp's CPU
// fill (keep them identical), one grid-stride loop, one element per thread iteration.
#include <algorithm>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/fill.h"

namespace beam::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;

__device__ __forceinline__ uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ float unit_normal(uint64_t bits) {
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    sum += (static_cast<float>((bits >> (16 * k)) & 0xFFFF) + (k == 3 ? 0.25f : 0.5f)) *
           (1.0f / 65536.0f);
  return (sum - 2.0f) * 1.7320508f;
}

template <typename T>
__global__ void fill_kernel(T* out, int64_t n, uint64_t seed, float std, float mean) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float v = mean + std * unit_normal(mix(seed, static_cast<uint64_t>(i)));
    if constexpr (sizeof(T) == 2) {
      out[i] = to_bf16_rn(v);
    } else {
      out[i] = v;
    }
  }
}

}  // namespace

void fill_random(CudaContext& ctx, const TensorView& t, uint64_t seed, float std, float mean) {
  const int64_t n = t.numel();
  const int64_t cap = std::max<int64_t>(1, int64_t{ctx.props.multiProcessorCount} * kBlocksPerSm);
  const unsigned grid =
      static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, cap));
  if (t.dtype == DType::kBF16) {
    fill_kernel<<<grid, kThreads, 0, ctx.stream>>>(t.as<bf16_t>(), n, seed, std, mean);
  } else {
    fill_kernel<<<grid, kThreads, 0, ctx.stream>>>(t.as<float>(), n, seed, std, mean);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda
