// fill_random: deterministic pseudo-random tensor contents (synthetic weights for benchmarks and
// tests), generated where the tensor lives so a 100 GB model never passes through host memory.
#pragma once

#include <cstdint>

#include "kernels/api/context.h"

namespace beam {

// t[i] = mean + std * z(seed, i), z ≈ standard normal (a sum of four uniforms from one 64-bit
// counter hash of (seed, i), rescaled to unit variance, so |z| < 3.47). t: any rank, bf16 or f32,
// on ctx's device; the value of element i depends only on (seed, i, std, mean), not on the device
// (the CPU and CUDA fills agree up to fp32 rounding before the bf16 rounding).
void fill_random(const KernelContext& ctx, const TensorView& t, uint64_t seed, float std,
                 float mean = 0.0f);

}  // namespace beam
