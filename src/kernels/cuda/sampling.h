// CUDA sampling and logprobs (kernels/api/sampling.h): a cluster of thread blocks per sampled row.
#pragma once

#include <span>

#include "core/tensor.h"
#include "kernels/api/sampling.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Arguments validated by kernels/api/sampling.cpp; rows, edits and allowed are host arrays,
// staged through ctx.staging. Queued on ctx.stream.
void sample_tokens(CudaContext& ctx, const TensorView& logits,
                   std::span<const SamplingRowParams> rows, std::span<const LogitEdit> edits,
                   std::span<const uint32_t> allowed, const TensorView& scratch,
                   const TensorView& out);

// Arguments validated by kernels/api/sampling.cpp; rows is a host array staged through
// ctx.staging. Queued on ctx.stream.
void score_tokens(CudaContext& ctx, const TensorView& logits, std::span<const ScoreRowParams> rows,
                  const TensorView& out);

}  // namespace beam::cuda
