// Position transforms applied to normalised q/k (BEAM.md §3.4, §3.5).
#pragma once

#include "kernels/api/context.h"

namespace beam {

// HF rotate-half RoPE over the whole head, in place. q: [T, Nq, D] bf16, k: [T, Nkv, D] bf16,
// positions: [T] i64. inv_freq[i] = 1 / θ^(2i/D) in fp32, angle = fp32(fp32(p) * inv_freq[i]),
// cos/sin evaluated in fp32 then rounded to bf16, and x*cos + rotate_half(x)*sin computed as
// bf16 tensor ops (each product and the sum rounded to bf16).
void apply_rope(const KernelContext& ctx, const TensorView& q, const TensorView& k,
                const TensorView& positions, float theta);

// SSMax on NoPE layers, in place: q = bf16(f32(q) * s(p)), s(p) = (1 + (p+1)/2048)^0.1 in fp32.
// q: [T, Nq, D] bf16, positions: [T] i64.
void apply_ssmax(const KernelContext& ctx, const TensorView& q, const TensorView& positions);

// The fp32 SSMax factor for one absolute position (shared by CPU and CUDA code and tests).
float ssmax_scale(int64_t position);

}  // namespace beam
