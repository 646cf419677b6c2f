// rms_norm / post_norm_residual: validate shapes and dtypes, dispatch by device.
#include "kernels/api/norm.h"

#include "kernels/api/checks.h"
#include "kernels/cpu/norm.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/norm.h"
#endif

namespace beam {

using kernel_checks::expect_tensor;

void rms_norm(const KernelContext& ctx, const TensorView& x, const TensorView& w, float eps,
              const TensorView& out) {
  constexpr const char* op = "rms_norm";
  expect_tensor(ctx, x, DType::kBF16, 2, op, "x");
  expect_tensor(ctx, w, DType::kBF16, 1, op, "w");
  expect_tensor(ctx, out, DType::kBF16, 2, op, "out");
  BEAM_CHECK(out.shape == x.shape && w.dim(0) == x.dim(1) && x.dim(1) > 0)
      << op << ": x " << x.shape.str() << ", w " << w.shape.str() << ", out " << out.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::rms_norm(kernel_checks::cpu_pool(ctx, op), x, w, eps, out);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::rms_norm(*ctx.cuda, x, w, eps, out);
      return;
#else
      kernel_checks::cuda_backend_not_built(op);
#endif
  }
}

void post_norm_residual(const KernelContext& ctx, const TensorView& branch,
                        const TensorView& w_post, float eps, float r, float c,
                        const TensorView& residual) {
  constexpr const char* op = "post_norm_residual";
  expect_tensor(ctx, branch, DType::kBF16, 2, op, "branch");
  expect_tensor(ctx, w_post, DType::kBF16, 1, op, "w_post");
  expect_tensor(ctx, residual, DType::kBF16, 2, op, "residual");
  BEAM_CHECK(residual.shape == branch.shape && w_post.dim(0) == branch.dim(1) && branch.dim(1) > 0)
      << op << ": branch " << branch.shape.str() << ", w_post " << w_post.shape.str()
      << ", residual " << residual.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::post_norm_residual(kernel_checks::cpu_pool(ctx, op), branch, w_post, eps, r, c,
                              residual);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::post_norm_residual(*ctx.cuda, branch, w_post, eps, r, c, residual);
      return;
#else
      kernel_checks::cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
