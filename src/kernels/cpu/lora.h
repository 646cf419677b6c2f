// CPU LoRA deltas (kernels/api/lora.h): the reference the CUDA kernel is tested against.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/api/lora.h"

namespace beam::cpu {

// Views validated by kernels/api/lora.cpp (shapes and dtypes as in that header). Each h[t, j] is
// vec.h's fixed-order dot product times the scale; each delta a fixed-order sum over j.
void lora_add(ThreadPool& pool, const TensorView& x, const LoraStack& stack,
              const TensorView& slots, const TensorView& out, int64_t col0);

}  // namespace beam::cpu
