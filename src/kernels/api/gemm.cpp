// linear(): validates shapes and dtypes, then dispatches by device.
#include "kernels/api/gemm.h"

#include "kernels/api/checks.h"
#include "kernels/cpu/gemm.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/gemm.h"
#endif

namespace beam {

using kernel_checks::expect_tensor;

void linear(const KernelContext& ctx, const TensorView& x, const TensorView& w,
            const TensorView& out) {
  constexpr const char* op = "linear";
  expect_tensor(ctx, x, {DType::kBF16, DType::kF32}, 2, op, "x");
  expect_tensor(ctx, w, {DType::kBF16, DType::kF32}, 2, op, "w");
  expect_tensor(ctx, out, {DType::kBF16, DType::kF32}, 2, op, "out");
  BEAM_CHECK(x.dim(1) == w.dim(1) && out.dim(0) == x.dim(0) && out.dim(1) == w.dim(0))
      << op << ": x " << x.shape.str() << " · w " << w.shape.str() << "ᵀ into out "
      << out.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::linear(kernel_checks::cpu_pool(ctx, op), x, w, out,
                  ctx.batch_invariant ? cpu::GemmPath::kTiles : cpu::GemmPath::kAuto);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::linear(*ctx.cuda, x, w, out);
      return;
#else
      kernel_checks::cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
