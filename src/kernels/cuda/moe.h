// CUDA mixture-of-experts ops (BEAM.md §3.10): grouped sigmoid routing and the routed experts,
// matching kernels/cpu/moe_route.cpp and moe_experts.cpp.
#pragma once

#include "core/tensor.h"
#include "kernels/api/moe.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/moe.cpp (shapes and dtypes as in that header), all on the
// device; both ops are queued on ctx.stream without host synchronisation or allocation (except
// moe_experts' scratch growth, below), so CUDA graphs can capture them.

// ids identical to the CPU op's and weights bit-identical (same fp32 operations in the same order).
// Limits of this kernel: E <= 2048 experts, num_groups <= 32, top_k <= 32. A NaN choice is not
// diagnosed (the CPU aborts): it ranks as -inf.
void moe_route(CudaContext& ctx, const TensorView& router_logits, const TensorView& bias,
               const RouterParams& params, const TensorView& ids, const TensorView& weights);

// Grouped GEMMs over the experts' token groups (bf16 tensor cores, fp32 accumulation), SwiGLU in
// the gate_up epilogue, fp32 combine per token in k order. Scratch lives in ctx.moe and is sized
// for T * top_k routed rows: the first call at a new largest T (or width) allocates, which must
// not happen during graph capture (checked). An expert id outside [0, E) traps the kernel (the
// stream reports the error), as the CPU op aborts.
void moe_experts(CudaContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& out);

}  // namespace beam::cuda
