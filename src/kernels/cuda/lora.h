// CUDA LoRA deltas (kernels/api/lora.h): one fused shrink + expand launch queued on ctx.stream.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "kernels/api/lora.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/lora.cpp (shapes and dtypes as in that header, r >= 1, T >= 1,
// 1..kMaxLoraOutputs outputs of one S and r), all on the device. Needs r <= 512 (checked); one
// launch for as many outputs as fit 512 rank rows. No host synchronization, allocation or host
// read of slots: safe inside a CUDA graph capture. A slot outside [kNoLoraSlot, S) traps the
// kernel.
void lora_add(CudaContext& ctx, const TensorView& x, std::span<const LoraOutput> outputs,
              const TensorView& slots);

}  // namespace beam::cuda
