// Linear layers: out[M, N] = x[M, K] · w[N, K]ᵀ with fp32 accumulation, one rounding to out's
// dtype.
#pragma once

#include "kernels/api/context.h"

namespace beam {

// x, w and out are each bf16 or f32, e.g. (bf16, bf16, bf16) for the projections and (bf16, f32,
// f32) for the fp32 router GEMM of BEAM.md §3.10 step 1 (bf16 operands are widened exactly).
// CPU: a fixed summation order, so a row's result does not depend on the other rows (batched =
// unbatched, bit for bit); with ctx.batch_invariant = false, 128 rows and more go to OpenBLAS
// sgemm (fp32, ~20% faster at 256 rows; its own order, so last-bit differences).
// CUDA: bf16 x bf16 at M <= 8 runs a fixed-order weight-streaming kernel whose rows do not depend
// on M (batch invariant up to 8 rows); larger M and fp32 GEMMs run cuBLASLt, whose order may.
void linear(const KernelContext& ctx, const TensorView& x, const TensorView& w,
            const TensorView& out);

}  // namespace beam
