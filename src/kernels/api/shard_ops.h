// The elementwise ops a tensor-parallel rank adds to the forward pass (model/tensor_parallel.h):
// rounding the ranks' summed fp32 partials once, and routing to the experts a rank holds.
#pragma once

#include <cstdint>

#include "kernels/api/context.h"

namespace beam {

// dst = bf16(src), round to nearest even (NaN stays NaN). src: f32, dst: bf16, one shape (any
// rank), both on ctx's device.
void round_to_bf16(const KernelContext& ctx, const TensorView& src, const TensorView& dst);

// dst = bf16(parts[0] + parts[1] + ... + parts[n - 1]), added in that order in fp32 (the order
// of LocalGroup's all-reduce), rounded once. parts: f32 [n, dst's shape]; dst: bf16; both on
// ctx's device.
void sum_ranks_to_bf16(const KernelContext& ctx, const TensorView& parts, const TensorView& dst);

// Expert parallelism: local[i] = ids[i] - first where first <= ids[i] < first + count, else
// kNoExpert (another rank's expert, or none), so moe_experts over the experts [first, first +
// count) adds exactly their slots. ids, local: [T, k] i32 on ctx's device (local may alias ids).
void localize_expert_ids(const KernelContext& ctx, const TensorView& ids, int64_t first,
                         int64_t count, const TensorView& local);

}  // namespace beam
