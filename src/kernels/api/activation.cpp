// Elementwise ops: validate shapes and dtypes, dispatch by device.
#include "kernels/api/activation.h"

#include "kernels/api/checks.h"
#include "kernels/cpu/activation.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/activation.h"
#endif

namespace beam {

using kernel_checks::cpu_pool;
using kernel_checks::cuda_backend_not_built;
using kernel_checks::expect_tensor;

void output_gate(const KernelContext& ctx, const TensorView& o, const TensorView& g,
                 const TensorView& bias) {
  constexpr const char* op = "output_gate";
  expect_tensor(ctx, o, DType::kBF16, 2, op, "o");
  expect_tensor(ctx, g, DType::kBF16, 2, op, "g");
  expect_tensor(ctx, bias, DType::kBF16, 1, op, "bias");
  BEAM_CHECK(g.shape == o.shape && bias.dim(0) > 0 && o.dim(1) % bias.dim(0) == 0)
      << op << ": o " << o.shape.str() << ", g " << g.shape.str() << ", bias " << bias.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::output_gate(cpu_pool(ctx, op), o, g, bias);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::output_gate(*ctx.cuda, o, g, bias);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void swiglu(const KernelContext& ctx, const TensorView& gate_up, const TensorView& act) {
  constexpr const char* op = "swiglu";
  expect_tensor(ctx, gate_up, DType::kBF16, 2, op, "gate_up");
  expect_tensor(ctx, act, DType::kBF16, 2, op, "act");
  BEAM_CHECK(gate_up.dim(0) == act.dim(0) && gate_up.dim(1) == 2 * act.dim(1))
      << op << ": gate_up " << gate_up.shape.str() << ", act " << act.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::swiglu(cpu_pool(ctx, op), gate_up, act);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::swiglu(*ctx.cuda, gate_up, act);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void softcap(const KernelContext& ctx, const TensorView& z, float cap, float multiplier,
             const TensorView& logits) {
  constexpr const char* op = "softcap";
  expect_tensor(ctx, z, DType::kBF16, 2, op, "z");
  expect_tensor(ctx, logits, DType::kF32, 2, op, "logits");
  BEAM_CHECK(z.shape == logits.shape)
      << op << ": z " << z.shape.str() << ", logits " << logits.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::softcap(cpu_pool(ctx, op), z, cap, multiplier, logits);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::softcap(*ctx.cuda, z, cap, multiplier, logits);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void add_rounded(const KernelContext& ctx, const TensorView& a, const TensorView& b,
                 const TensorView& out) {
  constexpr const char* op = "add_rounded";
  expect_tensor(ctx, a, DType::kBF16, 2, op, "a");
  expect_tensor(ctx, b, DType::kBF16, 2, op, "b");
  expect_tensor(ctx, out, DType::kBF16, 2, op, "out");
  BEAM_CHECK(a.shape == b.shape && a.shape == out.shape)
      << op << ": a " << a.shape.str() << ", b " << b.shape.str() << ", out " << out.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::add_rounded(cpu_pool(ctx, op), a, b, out);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::add_rounded(*ctx.cuda, a, b, out);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void embedding(const KernelContext& ctx, const TensorView& table, const TensorView& ids,
               const TensorView& out) {
  constexpr const char* op = "embedding";
  expect_tensor(ctx, table, DType::kBF16, 2, op, "table");
  expect_tensor(ctx, ids, DType::kI32, 1, op, "ids");
  expect_tensor(ctx, out, DType::kBF16, 2, op, "out");
  BEAM_CHECK(out.dim(0) == ids.dim(0) && out.dim(1) == table.dim(1))
      << op << ": table " << table.shape.str() << ", ids " << ids.shape.str() << ", out "
      << out.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::embedding(cpu_pool(ctx, op), table, ids, out);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::embedding(*ctx.cuda, table, ids, out);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
