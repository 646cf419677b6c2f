// CUDA LoRA deltas (kernels/api/lora.h), queued on ctx.stream: one fused shrink + expand launch,
// or past 256 tokens a tensor-core shrink and an expand a module.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "kernels/api/lora.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/lora.cpp (shapes and dtypes as in that header, r >= 1, T >= 1,
// 1..kMaxLoraOutputs outputs of one S and r), all on the device. Needs r <= 512 (checked). Up to
// 256 tokens: one launch for as many outputs as fit 512 rank rows, no scratch. Past 256 tokens the
// outputs of 16-byte rows (x, A, out and col0 on 8-element boundaries, n % 8 == 0, r % 4 == 0)
// run on tensor cores with their h in ctx.lora, which grows on the stream (never during graph
// capture: reserve it with an eager call of the largest size first). No host synchronization or
// host read of slots. A slot outside [kNoLoraSlot, S) traps the kernel. invariant (a
// batch-invariant context): every token count takes the one-launch kernel (its own order of sums,
// not the tensor cores').
void lora_add(CudaContext& ctx, const TensorView& x, std::span<const LoraOutput> outputs,
              const TensorView& slots, bool invariant = false);

}  // namespace beam::cuda
