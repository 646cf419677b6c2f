// Linear layers: out[M, N] = x[M, K] · w[N, K]ᵀ with fp32 accumulation, one rounding to out's dtype.
#pragma once

#include "kernels/api/context.h"

namespace beam {

// Supported (x, w, out) dtypes: (bf16, bf16, bf16), (bf16, bf16, f32), (f32, f32, f32).
// A bf16 x with an f32 w is widened exactly (the fp32 router GEMM of BEAM.md §3.10 step 1).
void linear(const KernelContext& ctx, const TensorView& x, const TensorView& w,
            const TensorView& out);

}  // namespace beam
