// CPU RMSNorm and the sandwich post-norm + depth-scaled residual (BEAM.md §3.2, §3.8).
#pragma once

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace beam::cpu {

// Views validated by kernels/api/norm.cpp: x, out [rows, n] bf16 (may alias), w [n] bf16.
void rms_norm(ThreadPool& pool, const TensorView& x, const TensorView& w, float eps,
              const TensorView& out);

// branch, residual [T, H] bf16, w_post [H] bf16; residual updated in place.
void post_norm_residual(ThreadPool& pool, const TensorView& branch, const TensorView& w_post,
                        float eps, float r, float c, const TensorView& residual);

}  // namespace beam::cpu
