// CUDA RMSNorm and the fused sandwich post-norm + depth-scaled residual (BEAM.md §3.2, §3.8),
// optionally followed by the next block's pre-norm.
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

// post_norm_residual, then out = rms_norm(residual, w_next) in one launch where rows are 8-wide
// and 16-byte aligned (else the two ops); bit-identical to the two ops. out [T, H] bf16 may alias
// branch, not residual.
void post_norm_residual_norm(CudaContext& ctx, const TensorView& branch, const TensorView& w_post,
                             float eps, float r, float c, const TensorView& residual,
                             const TensorView& w_next, const TensorView& out);

}  // namespace beam::cuda
