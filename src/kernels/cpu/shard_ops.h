// CPU ops of a tensor-parallel rank (kernels/api/shard_ops.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace beam::cpu {

// Views validated by kernels/api/shard_ops.cpp (shapes and dtypes as in that header).
void round_to_bf16(ThreadPool& pool, const TensorView& src, const TensorView& dst);
void sum_ranks_to_bf16(ThreadPool& pool, const TensorView& parts, const TensorView& dst);
void localize_expert_ids(const TensorView& ids, int64_t first, int64_t count,
                         const TensorView& local);

}  // namespace beam::cpu
