// linear() / linear_split(): validate shapes and dtypes, then dispatch by device.
#include "kernels/api/gemm.h"

#include "kernels/api/checks.h"
#include "kernels/cpu/gemm.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/gemm.h"
#endif

namespace beam {

using kernel_checks::expect_tensor;

namespace {

cpu::GemmPath cpu_path(const KernelContext& ctx) {
  return batch_invariant(ctx) ? cpu::GemmPath::kTiles : cpu::GemmPath::kAuto;
}

}  // namespace

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
      cpu::linear(kernel_checks::cpu_pool(ctx, op), x, w, out, cpu_path(ctx));
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::linear(*ctx.cuda, x, w, out, batch_invariant(ctx));
      return;
#else
      kernel_checks::cuda_backend_not_built(op);
#endif
  }
}

void linear_split(const KernelContext& ctx, const TensorView& x, const TensorView& w,
                  std::span<const TensorView> outs) {
  constexpr const char* op = "linear_split";
  expect_tensor(ctx, x, {DType::kBF16, DType::kF32}, 2, op, "x");
  expect_tensor(ctx, w, {DType::kBF16, DType::kF32}, 2, op, "w");
  BEAM_CHECK(!outs.empty() && outs.size() <= kMaxLinearSplits)
      << op << ": " << outs.size() << " outputs (1.." << kMaxLinearSplits << ")";
  BEAM_CHECK(x.dim(1) == w.dim(1)) << op << ": x " << x.shape.str() << " · w " << w.shape.str();
  int64_t rows = 0;
  for (const TensorView& out : outs) {
    expect_tensor(ctx, out, {DType::kBF16, DType::kF32}, 2, op, "out");
    BEAM_CHECK(out.dtype == outs[0].dtype && out.dim(0) == x.dim(0))
        << op << ": out " << out.shape.str() << " (" << dtype_name(out.dtype) << ") for x "
        << x.shape.str() << " (outputs share one dtype, " << dtype_name(outs[0].dtype) << ")";
    rows += out.dim(1);
  }
  BEAM_CHECK(rows == w.dim(0)) << op << ": outputs take " << rows << " rows of w "
                               << w.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::linear_split(kernel_checks::cpu_pool(ctx, op), x, w, outs, cpu_path(ctx));
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::linear_split(*ctx.cuda, x, w, outs, batch_invariant(ctx));
      return;
#else
      kernel_checks::cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
