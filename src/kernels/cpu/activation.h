// CPU elementwise ops: attention output gate, SwiGLU, final softcap, embedding gather.
#pragma once

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace beam::cpu {

// Views validated by kernels/api/activation.cpp (shapes and dtypes as in that header).
void output_gate(ThreadPool& pool, const TensorView& o, const TensorView& g,
                 const TensorView& bias);
void swiglu(ThreadPool& pool, const TensorView& gate_up, const TensorView& act);
void softcap(ThreadPool& pool, const TensorView& z, float cap, float multiplier,
             const TensorView& logits);
void add_rounded(ThreadPool& pool, const TensorView& a, const TensorView& b, const TensorView& out);
void embedding(ThreadPool& pool, const TensorView& table, const TensorView& ids,
               const TensorView& out);

}  // namespace beam::cpu
