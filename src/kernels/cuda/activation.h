// CUDA elementwise ops: attention output gate, SwiGLU, final softcap, embedding row gather.
#pragma once

#include "core/tensor.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/activation.cpp (shapes and dtypes as in that header), all on
// the device; every op is queued on ctx.stream.
void output_gate(CudaContext& ctx, const TensorView& o, const TensorView& g,
                 const TensorView& bias);
void swiglu(CudaContext& ctx, const TensorView& gate_up, const TensorView& act);
void softcap(CudaContext& ctx, const TensorView& z, float cap, float multiplier,
             const TensorView& logits);
void add_rounded(CudaContext& ctx, const TensorView& a, const TensorView& b, const TensorView& out);
// An id outside [0, table rows) is a caller bug: the kernel traps (the stream reports an error).
void embedding(CudaContext& ctx, const TensorView& table, const TensorView& ids,
               const TensorView& out);

}  // namespace beam::cuda
