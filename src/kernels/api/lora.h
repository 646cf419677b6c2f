// Per-token LoRA deltas on a linear layer's output, for serving several adapters in one batch
// (vLLM's / punica's semantics: the base output is rounded first, the delta is added in fp32):
//   h[t, j]       = scale[s] · Σ_i f32(x[t, i]) · f32(a[s, j, i])            (fp32, kept unrounded)
//   out[t, c0 + o] = bf16( f32(out[t, c0 + o]) + Σ_j f32(b[s, o, j]) · h[t, j] )
// with s = slots[t]; a token whose slot is kNoLoraSlot is left alone (its bits do not change).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/api/context.h"

namespace beam {

// The slot of a token that uses no adapter.
constexpr int32_t kNoLoraSlot = -1;

// The largest rank lora_add takes on `device` (the CUDA kernel keeps a token group's h in shared
// memory).
constexpr int64_t lora_max_rank(Device /*device*/) {
  return 512;
}

// One target module's factors for every adapter slot, zero-padded to the stack's rank r (a slot
// of lower rank, or one whose adapter leaves the module alone, has zero rows / columns there, which
// add exact zeros).
struct LoraStack {
  TensorView a;      // [S, r, in] bf16 (lora_A of each slot)
  TensorView b;      // [S, n, r] bf16 (lora_B of each slot)
  TensorView scale;  // [S] f32 (lora_alpha / r, or / √r with rsLoRA; 0 where the slot is empty)
};

// out[:, col0 : col0 + n] += the deltas above. x: [T, in] bf16; slots: [T] i32 in
// [kNoLoraSlot, S) on ctx's device (read when the op runs: a CUDA graph replays with the values
// of the time); out: [T, N] bf16 with col0 + n <= N. A slot outside that range is a caller bug:
// it aborts (CPU) or traps the kernel (CUDA). CPU: each h and each output a fixed-order fp32 sum,
// so a token's result does not depend on the other tokens. CUDA: the same sums in another order.
void lora_add(const KernelContext& ctx, const TensorView& x, const LoraStack& stack,
              const TensorView& slots, const TensorView& out, int64_t col0);

// One module of a lora_add over several modules that share x: its stack and where its deltas go
// (out[:, col0 : col0 + n]).
struct LoraOutput {
  LoraStack stack;
  TensorView out;
  int64_t col0 = 0;
};
// Most outputs one call takes.
inline constexpr size_t kMaxLoraOutputs = 4;

// The lora_add above for each output (1..kMaxLoraOutputs; stacks of one S and r on x's width),
// e.g. the q, k, v and gate projections or the dense MLP's gate and up: the same bits as one call
// per output; CUDA runs them in one launch (per 512 rank rows).
void lora_add(const KernelContext& ctx, const TensorView& x, std::span<const LoraOutput> outputs,
              const TensorView& slots);

}  // namespace beam
