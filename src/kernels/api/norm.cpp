// rms_norm / post_norm_residual / post_norm_residual_norm: validate shapes and dtypes, dispatch by
// device.
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

namespace {

void check_post_norm(const KernelContext& ctx, const TensorView& branch, const TensorView& w_post,
                     const TensorView& residual, const char* op) {
  expect_tensor(ctx, branch, DType::kBF16, 2, op, "branch");
  expect_tensor(ctx, w_post, DType::kBF16, 1, op, "w_post");
  expect_tensor(ctx, residual, DType::kBF16, 2, op, "residual");
  BEAM_CHECK(residual.shape == branch.shape && w_post.dim(0) == branch.dim(1) && branch.dim(1) > 0)
      << op << ": branch " << branch.shape.str() << ", w_post " << w_post.shape.str()
      << ", residual " << residual.shape.str();
}

}  // namespace

void post_norm_residual(const KernelContext& ctx, const TensorView& branch,
                        const TensorView& w_post, float eps, float r, float c,
                        const TensorView& residual) {
  constexpr const char* op = "post_norm_residual";
  check_post_norm(ctx, branch, w_post, residual, op);
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

void post_norm_residual_norm(const KernelContext& ctx, const TensorView& branch,
                             const TensorView& w_post, float eps, float r, float c,
                             const TensorView& residual, const TensorView& w_next,
                             const TensorView& out) {
  constexpr const char* op = "post_norm_residual_norm";
  check_post_norm(ctx, branch, w_post, residual, op);
  expect_tensor(ctx, w_next, DType::kBF16, 1, op, "w_next");
  expect_tensor(ctx, out, DType::kBF16, 2, op, "out");
  BEAM_CHECK(w_next.dim(0) == branch.dim(1) && out.shape == branch.shape)
      << op << ": branch " << branch.shape.str() << ", w_next " << w_next.shape.str() << ", out "
      << out.shape.str();
  BEAM_CHECK(out.data != residual.data || out.numel() == 0) << op << ": out aliases residual";
  switch (ctx.device) {
    case Device::kCpu: {
      ThreadPool& pool = kernel_checks::cpu_pool(ctx, op);
      cpu::post_norm_residual(pool, branch, w_post, eps, r, c, residual);
      cpu::rms_norm(pool, residual, w_next, eps, out);
      return;
    }
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::post_norm_residual_norm(*ctx.cuda, branch, w_post, eps, r, c, residual, w_next, out);
      return;
#else
      kernel_checks::cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
