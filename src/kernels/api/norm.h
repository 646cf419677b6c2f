// RMSNorm (BEAM.md §3.2): y = bf16(f32(x) * rsqrt(mean(f32(x)^2) + eps) * f32(w)), one rounding.
#pragma once

#include "kernels/api/context.h"

namespace beam {

// x: [rows, n] bf16, w: [n] bf16, out: [rows, n] bf16 (may alias x). Per-head Q/K norms pass
// x viewed as [tokens * heads, head_dim].
void rms_norm(const KernelContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& out);

// Sandwich post-norm + depth-scaled residual (BEAM.md §3.8), in place on residual:
//   y = rms_norm(branch, w_post); residual = bf16(bf16(residual * r) + bf16(y * c)).
// branch, residual: [T, H] bf16; w_post: [H] bf16.
void post_norm_residual(const KernelContext& ctx, const TensorView& branch,
                        const TensorView& w_post, float eps, float r, float c,
                        const TensorView& residual);

// post_norm_residual followed by the next block's pre-norm: out = rms_norm(residual, w_next)
// with residual as updated. Bit-identical to the two ops (CUDA: one launch at 8-wide aligned
// rows). w_next: [H] bf16, out: [T, H] bf16 (may alias branch, not residual).
void post_norm_residual_norm(const KernelContext& ctx, const TensorView& branch,
                             const TensorView& w_post, float eps, float r, float c,
                             const TensorView& residual, const TensorView& w_next,
                             const TensorView& out);

}  // namespace beam
