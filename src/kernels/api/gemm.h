// Linear layers: out[M, N] = x[M, K] · w[N, K]ᵀ with fp32 accumulation, one rounding to out's
// dtype; linear_split writes consecutive row ranges of w into separate outputs.
#pragma once

#include <cstddef>
#include <span>

#include "kernels/api/context.h"

namespace beam {

// x, w and out are each bf16 or f32, e.g. (bf16, bf16, bf16) for the projections and (bf16, f32,
// f32) for the fp32 router GEMM of BEAM.md §3.10 step 1 (bf16 operands are widened exactly).
// CPU: a fixed summation order, so a row's result does not depend on the other rows (batched =
// unbatched, bit for bit); with BatchInvariance::kNever, 128 rows and more go to OpenBLAS
// sgemm (fp32, ~20% faster at 256 rows; its own order, so last-bit differences).
// CUDA: bf16 x bf16 at M = 1 runs a fixed-order weight-streaming kernel; larger M and fp32 GEMMs
// run cuBLASLt, whose summation order may depend on M (not batch invariant), unless the context
// is batch invariant (BatchInvariance::kAlways): then every M runs one cuBLASLt algorithm per
// shape without split-K.
void linear(const KernelContext& ctx, const TensorView& x, const TensorView& w,
            const TensorView& out);

// Most outputs one linear_split call takes.
inline constexpr size_t kMaxLinearSplits = 8;

// linear() against w [N, K] whose rows are split consecutively over outs (1..kMaxLinearSplits
// outputs, one dtype): outs[i] [M, n_i] = x · w.rows(n_0 + ... + n_{i-1}, n_i)ᵀ, Σ n_i = N
// (e.g. the packed q/k/v/gate projection). Bit-identical to one linear() per row range; CUDA runs
// one launch for all ranges where linear() would take the small-M kernel.
void linear_split(const KernelContext& ctx, const TensorView& x, const TensorView& w,
                  std::span<const TensorView> outs);

}  // namespace beam
