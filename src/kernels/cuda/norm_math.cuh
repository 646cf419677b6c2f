// The fp32 RMSNorm statistic shared by the CUDA norm kernels (norm.cu) and the fused q/k norm +
// RoPE/SSMax kernel (rope.cu), so both compute inv_rms with the same operations.
#pragma once

#include <cstdint>

namespace beam::cuda {

// 1 / sqrt(sum_sq / n + eps) in fp32, IEEE division and square root.
__device__ __forceinline__ float inv_rms_of(float sum_sq, int64_t n, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
}

}  // namespace beam::cuda
