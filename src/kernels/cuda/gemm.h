// CUDA linear(): out[M, N] = x[M, K] · w[N, K]ᵀ through cuBLASLt with fp32 accumulation.
#pragma once

#include "core/tensor.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/gemm.cpp, all in device memory. Supported dtypes (x, w, out):
// (bf16, bf16, bf16|f32) as one bf16 tensor-core GEMM, and (bf16|f32, f32, f32) as an exact fp32
// GEMM (the router of BEAM.md §3.10; a bf16 x is widened first). Other combinations abort.
void linear(CudaContext& ctx, const TensorView& x, const TensorView& w, const TensorView& out);

}  // namespace beam::cuda
