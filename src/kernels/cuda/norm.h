// CUDA RMSNorm and the fused sandwich post-norm + depth-scaled residual (BEAM.md §3.2, §3.8).
#pragma once

#include "core/tensor.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/norm.cpp: x, out [rows, n] bf16 on the device (may alias),
// w [n] bf16. Queued on ctx.stream.
void rms_norm(CudaContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& out);

// branch, residual [T, H] bf16, w_post [H] bf16; residual updated in place on ctx.stream.
void post_norm_residual(CudaContext& ctx, const TensorView& branch, const TensorView& w_post,
                        float eps, float r, float c, const TensorView& residual);

}  // namespace beam::cuda
