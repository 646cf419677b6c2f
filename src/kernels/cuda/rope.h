// CUDA position transforms on normalised q/k: rotate-half RoPE (BEAM.md §3.4), SSMax (§3.5).
#pragma once

#include "core/tensor.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/rope.cpp: q [T, Nq, D], k [T, Nkv, D] bf16 (D <= 512) and
// positions [T] i64, all on the device; q and k rotated in place on ctx.stream.
void apply_rope(CudaContext& ctx, const TensorView& q, const TensorView& k,
                const TensorView& positions, float theta);

// q [T, Nq, D] bf16, positions [T] i64 on the device; q scaled in place on ctx.stream.
void apply_ssmax(CudaContext& ctx, const TensorView& q, const TensorView& positions);

}  // namespace beam::cuda
