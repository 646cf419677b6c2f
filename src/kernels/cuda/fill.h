// CUDA fill_random (kernels/api/fill.h): one grid-stride kernel queued on ctx.stream.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// t validated by kernels/api/fill.cpp (bf16 or f32, on the device).
void fill_random(CudaContext& ctx, const TensorView& t, uint64_t seed, float std, float mean);

}  // namespace beam::cuda
