// LoRA deltas: validate shapes and dtypes, dispatch by device.
#include "kernels/api/lora.h"

#include "kernels/api/checks.h"
#include "kernels/cpu/lora.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/lora.h"
#endif

namespace beam {

using kernel_checks::cpu_pool;
using kernel_checks::cuda_backend_not_built;
using kernel_checks::expect_tensor;

void lora_add(const KernelContext& ctx, const TensorView& x, const LoraStack& stack,
              const TensorView& slots, const TensorView& out, int64_t col0) {
  const LoraOutput output{stack, out, col0};
  lora_add(ctx, x, std::span<const LoraOutput>(&output, 1), slots);
}

void lora_add(const KernelContext& ctx, const TensorView& x, std::span<const LoraOutput> outputs,
              const TensorView& slots) {
  constexpr const char* op = "lora_add";
  BEAM_CHECK(!outputs.empty() && outputs.size() <= kMaxLoraOutputs)
      << op << ": " << outputs.size() << " outputs (1.." << kMaxLoraOutputs << ")";
  expect_tensor(ctx, x, DType::kBF16, 2, op, "x");
  expect_tensor(ctx, slots, DType::kI32, 1, op, "slots");
  const int64_t S = outputs[0].stack.a.dim(0), r = outputs[0].stack.a.dim(1);
  for (const LoraOutput& o : outputs) {
    const LoraStack& stack = o.stack;
    expect_tensor(ctx, stack.a, DType::kBF16, 3, op, "a");
    expect_tensor(ctx, stack.b, DType::kBF16, 3, op, "b");
    expect_tensor(ctx, stack.scale, DType::kF32, 1, op, "scale");
    expect_tensor(ctx, o.out, DType::kBF16, 2, op, "out");
    BEAM_CHECK(stack.a.dim(0) == S && stack.a.dim(1) == r && stack.a.dim(2) == x.dim(1) &&
               stack.b.dim(0) == S && stack.b.dim(2) == r && stack.scale.dim(0) == S &&
               slots.dim(0) == x.dim(0) && o.out.dim(0) == x.dim(0) && o.col0 >= 0 &&
               o.col0 + stack.b.dim(1) <= o.out.dim(1))
        << op << ": x " << x.shape.str() << ", a " << stack.a.shape.str() << ", b "
        << stack.b.shape.str() << ", scale " << stack.scale.shape.str() << ", slots "
        << slots.shape.str() << ", out " << o.out.shape.str() << ", col0 " << o.col0
        << " (every output's S and r those of the first: " << S << ", " << r << ")";
  }
  if (x.dim(0) == 0 || r == 0) return;
  switch (ctx.device) {
    case Device::kCpu:
      for (const LoraOutput& o : outputs)
        cpu::lora_add(cpu_pool(ctx, op), x, o.stack, slots, o.out, o.col0);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::lora_add(*ctx.cuda, x, outputs, slots, batch_invariant(ctx));
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
