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

// Final soft-capping (§3.11): logits = cap * tanh(f32(z) / cap), or f32(z) when cap <= 0.
// z: [T, V] bf16, logits: [T, V] f32.
void softcap(const KernelContext& ctx, const TensorView& z, float cap, const TensorView& logits);

// Row gather: out[t] = table[ids[t]]. table: [V, H] bf16, ids: [T] i32, out: [T, H] bf16.
void embedding(const KernelContext& ctx, const TensorView& table, const TensorView& ids,
               const TensorView& out);

}  // namespace beam
