// CUDA ops of a tensor-parallel rank (kernels/api/shard_ops.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/shard_ops.cpp, on the device; queued on ctx.stream.
void round_to_bf16(CudaContext& ctx, const TensorView& src, const TensorView& dst);
void sum_ranks_to_bf16(CudaContext& ctx, const TensorView& parts, const TensorView& dst);
void localize_expert_ids(CudaContext& ctx, const TensorView& ids, int64_t first, int64_t count,
                         const TensorView& local);

}  // namespace beam::cuda
