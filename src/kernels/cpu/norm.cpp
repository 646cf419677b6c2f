// CPU RMSNorm: fp32 statistics and affine multiply, one bf16 rounding after the weight multiply.
// The sum of squares uses the fixed lane order of vec.h, so results match across builds.
#include "kernels/cpu/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/vec.h"

namespace beam::cpu {
namespace {

// Rows per task: keep each task at least ~16K elements so tiny per-head norms are not split.
int64_t min_rows_per_task(int64_t n) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
}

// y[i] = f32(x[i]) * inv_rms * w[i] in fp32 (left to right), inv_rms = 1/sqrt(mean(x^2) + eps).
// xf: the row widened to fp32 (n values); y: fp32 results before rounding.
void normalize_row(const float* xf, const float* wf, int64_t n, float eps, float* y) {
  float sum_sq;
  dot_tile<1, 1>(xf, n, xf, n, n, &sum_sq);
  const float mean = sum_sq / static_cast<float>(n);
  const float inv_rms = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = xf[i] * inv_rms * wf[i];
}

}  // namespace

void rms_norm(ThreadPool& pool, const TensorView& x, const TensorView& w, float eps,
              const TensorView& out) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  std::vector<float> wf(static_cast<size_t>(n));
  widen_bf16(w.as<bf16>(), wf.data(), n);
  pool.parallel_for(rows, min_rows_per_task(n), [&](int64_t r0, int64_t r1) {
    std::vector<float> xf(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int64_t r = r0; r < r1; ++r) {
      widen_bf16(x.as<bf16>() + r * n, xf.data(), n);
      normalize_row(xf.data(), wf.data(), n, eps, y.data());
      narrow_to_bf16(y.data(), out.as<bf16>() + r * n, n);
    }
  });
}

void post_norm_residual(ThreadPool& pool, const TensorView& branch, const TensorView& w_post,
                        float eps, float r, float c, const TensorView& residual) {
  const int64_t rows = branch.dim(0), n = branch.dim(1);
  std::vector<float> wf(static_cast<size_t>(n));
  widen_bf16(w_post.as<bf16>(), wf.data(), n);
  pool.parallel_for(rows, min_rows_per_task(n), [&](int64_t r0, int64_t r1) {
    std::vector<float> xf(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int64_t row = r0; row < r1; ++row) {
      widen_bf16(branch.as<bf16>() + row * n, xf.data(), n);
      normalize_row(xf.data(), wf.data(), n, eps, y.data());
      bf16* res = residual.as<bf16>() + row * n;
      for (int64_t i = 0; i < n; ++i) {
        // y is rounded (norm output), then both scaled operands are rounded before the add.
        const float scaled_branch = round_bf16(round_bf16(y[i]) * c);
        const float scaled_res = round_bf16(to_float(res[i]) * r);
        res[i] = to_bf16(scaled_res + scaled_branch);
      }
    }
  });
}

}  // namespace beam::cpu
