// round_to_bf16 / localize_expert_ids: validate, dispatch by device.
#include "kernels/api/shard_ops.h"

#include "kernels/api/checks.h"
#include "kernels/cpu/shard_ops.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/shard_ops.h"
#endif

namespace beam {

using kernel_checks::cpu_pool;
using kernel_checks::cuda_backend_not_built;
using kernel_checks::expect_tensor;

void round_to_bf16(const KernelContext& ctx, const TensorView& src, const TensorView& dst) {
  constexpr const char* op = "round_to_bf16";
  expect_tensor(ctx, src, DType::kF32, src.rank(), op, "src");
  expect_tensor(ctx, dst, DType::kBF16, src.rank(), op, "dst");
  BEAM_CHECK(src.shape == dst.shape)
      << op << ": src " << src.shape.str() << ", dst " << dst.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::round_to_bf16(cpu_pool(ctx, op), src, dst);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::round_to_bf16(*ctx.cuda, src, dst);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void sum_ranks_to_bf16(const KernelContext& ctx, const TensorView& parts, const TensorView& dst) {
  constexpr const char* op = "sum_ranks_to_bf16";
  expect_tensor(ctx, parts, DType::kF32, parts.rank(), op, "parts");
  expect_tensor(ctx, dst, DType::kBF16, dst.rank(), op, "dst");
  BEAM_CHECK(parts.rank() >= 1 && parts.dim(0) >= 1 && parts.numel() == parts.dim(0) * dst.numel())
      << op << ": parts " << parts.shape.str() << ", dst " << dst.shape.str()
      << " (parts: [ranks, dst's elements])";
  switch (ctx.device) {
    case Device::kCpu:
      cpu::sum_ranks_to_bf16(cpu_pool(ctx, op), parts, dst);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::sum_ranks_to_bf16(*ctx.cuda, parts, dst);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void localize_expert_ids(const KernelContext& ctx, const TensorView& ids, int64_t first,
                         int64_t count, const TensorView& local) {
  constexpr const char* op = "localize_expert_ids";
  expect_tensor(ctx, ids, DType::kI32, 2, op, "ids");
  expect_tensor(ctx, local, DType::kI32, 2, op, "local");
  BEAM_CHECK(ids.shape == local.shape && first >= 0 && count >= 0 && first + count <= INT32_MAX)
      << op << ": ids " << ids.shape.str() << ", local " << local.shape.str() << ", experts ["
      << first << ", " << first + count << ")";
  switch (ctx.device) {
    case Device::kCpu:
      cpu::localize_expert_ids(ids, first, count, local);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::localize_expert_ids(*ctx.cuda, ids, first, count, local);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
