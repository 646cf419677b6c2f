// Elementwise activations with BEAM.md's rounding points.
#pragma once

#include "kernels/api/context.h"

namespace beam {

// Attention output gate (§3.7), in place on o: t = bf16(g + b[head]); s = bf16(sigmoid(f32(t)));
// o = bf16(o * s). o, g: [T, Nq * D] bf16; bias: [Nq] bf16.
void output_gate(const KernelContext& ctx, const TensorView& o, const TensorView& g,
                 const TensorView& bias);

// SwiGLU (§3.9): act = bf16(silu(f32(gate)) * f32(up)). gate_up: [T, 2 * I] bf16 holding gate in
// columns [0, I) and up in [I, 2I); act: [T, I] bf16.
void swiglu(const KernelContext& ctx, const TensorView& gate_up, const TensorView& act);

// Final soft-capping (§3.11) after a multiplier: x = f32(z) * multiplier (exactly f32(z) at 1);
// logits = cap * tanh(x / cap), or x when cap <= 0. z: [T, V] bf16, logits: [T, V] f32.
void softcap(const KernelContext& ctx, const TensorView& z, float cap, float multiplier,
             const TensorView& logits);

// out = bf16(f32(a) + f32(b)) elementwise. a, b, out: [T, n] bf16 (out may alias a or b).
void add_rounded(const KernelContext& ctx, const TensorView& a, const TensorView& b,
                 const TensorView& out);

// Row gather: out[t] = table[ids[t]]. table: [V, H] bf16, ids: [T] i32, out: [T, H] bf16.
void embedding(const KernelContext& ctx, const TensorView& table, const TensorView& ids,
               const TensorView& out);

}  // namespace beam
