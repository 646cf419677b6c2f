// rms_norm and post_norm_residual: fp32 statistics, one rounding after the weight multiply, and
// the depth-scaled residual with both scaled operands rounded before the add (BEAM.md §3.2, §3.8).
#include "kernels/api/norm.h"

#include "kernel_test_util.h"

namespace beam {
namespace {

using test::Contexts;

// fp32 RMSNorm of one row in the kernel's documented order (before the bf16 rounding).
std::vector<float> norm_row_f32(const TensorView& x, int64_t r, const TensorView& w, float eps) {
  std::vector<float> xf = test::row_f32(x, r), wf = test::row_f32(w.reshape({1, w.dim(0)}), 0);
  const int64_t n = x.dim(1);
  const float mean = test::documented_dot(xf.data(), xf.data(), n) / static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(mean + eps);
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[i] = xf[i] * inv * wf[i];
  return y;
}

void check_rms_norm(int64_t rows, int64_t n, Contexts& ctx, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << "rows=" << rows << " n=" << n);
  const float eps = 1e-6f;
  HostTensor x = test::random_bf16({rows, n}, rng, 3.0f),
             w = test::random_bf16({n}, rng, 0.3f, 1.0f);
  HostTensor out1(DType::kBF16, {rows, n}), in_place = test::copy_of(x);
  rms_norm(ctx.one, x.view, w.view, eps, out1.view);
  rms_norm(ctx.two, in_place.view, w.view, eps, in_place.view);  // out aliases x
  ASSERT_TRUE(test::bits_equal(out1.view, in_place.view)) << "1 vs 2 threads / aliasing differ";

  int64_t not_exact = 0, rounded_early_differs = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> y = norm_row_f32(x.view, r, w.view, eps);
    std::vector<float> xr = test::row_f32(x.view, r);
    double ms = 0;
    for (float v : xr) ms += double(v) * v;
    const double inv = 1.0 / std::sqrt(ms / n + eps);
    for (int64_t i = 0; i < n; ++i) {
      const bf16 got = out1.as<bf16>()[r * n + i];
      ASSERT_EQ(got.bits, to_bf16(y[i]).bits) << "row " << r << " i " << i;
      const double exact = double(xr[i]) * inv * double(to_float(w.as<bf16>()[i]));
      ASSERT_LE(test::bf16_ulps(to_float(got), float(exact)), 1) << "row " << r << " i " << i;
      not_exact += got.bits != to_bf16(float(exact)).bits;
      // HF Llama-style rounding before the weight multiply gives different results.
      rounded_early_differs +=
          to_bf16(round_bf16(xr[i] * float(inv)) * to_float(w.as<bf16>()[i])).bits != got.bits;
    }
  }
  EXPECT_LT(not_exact, rows * n / 100 + 1);
  EXPECT_GT(rounded_early_differs, 0);
}

TEST(RmsNorm, MatchesReferenceAndRoundsOnceAfterWeight) {
  Contexts ctx;
  std::mt19937 rng(11);
  check_rms_norm(7, 256, ctx, rng);       // tiny hidden
  check_rms_norm(5 * 4, 128, ctx, rng);   // per-head q norm: [T * Nq, D]
  check_rms_norm(3, 100, ctx, rng);       // n not a multiple of 8
  check_rms_norm(4, 5120, ctx, rng);      // Beam hidden
  check_rms_norm(2 * 48, 128, ctx, rng);  // Beam per-head
}

void check_post_norm(int64_t T, int64_t H, int64_t idx, Contexts& ctx, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << "T=" << T << " H=" << H << " idx=" << idx);
  const float eps = 1e-6f;
  const float r = static_cast<float>(std::sqrt((idx - 1.0) / idx)),
              c = static_cast<float>(1.0 / std::sqrt(double(idx)));
  HostTensor branch = test::random_bf16({T, H}, rng, 0.5f),
             w = test::random_bf16({H}, rng, 0.3f, 1.0f);
  HostTensor residual = test::random_bf16({T, H}, rng, 1.0f);
  HostTensor res1 = test::copy_of(residual), res2 = test::copy_of(residual);
  post_norm_residual(ctx.one, branch.view, w.view, eps, r, c, res1.view);
  post_norm_residual(ctx.two, branch.view, w.view, eps, r, c, res2.view);
  ASSERT_TRUE(test::bits_equal(res1.view, res2.view));
  int64_t single_rounding_differs = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> y = norm_row_f32(branch.view, t, w.view, eps);
    for (int64_t i = 0; i < H; ++i) {
      const float res = to_float(residual.as<bf16>()[t * H + i]), yb = round_bf16(y[i]);
      const bf16 want = to_bf16(round_bf16(res * r) + round_bf16(yb * c));
      ASSERT_EQ(res2.as<bf16>()[t * H + i].bits, want.bits) << "t " << t << " i " << i;
      single_rounding_differs += to_bf16(res * r + yb * c).bits != want.bits;
    }
  }
  EXPECT_GT(single_rounding_differs, 0) << "test does not distinguish the double rounding";
}

TEST(PostNormResidual, RoundsBothScaledOperandsBeforeTheAdd) {
  Contexts ctx;
  std::mt19937 rng(12);
  check_post_norm(6, 256, 2, ctx, rng);     // layer 0 attention: r = c = 0.70711
  check_post_norm(6, 256, 13, ctx, rng);    // tiny-beam last MLP
  check_post_norm(2, 5120, 105, ctx, rng);  // Beam layer 51 MLP
}

// post_norm_residual_norm = post_norm_residual then rms_norm of the updated residual, bit for bit
// (out in its own buffer and aliasing branch), at tiny, odd and Beam widths.
TEST(PostNormResidualNorm, EqualsPostNormResidualThenRmsNorm) {
  Contexts ctx;
  std::mt19937 rng(13);
  const float eps = 1e-6f;
  for (auto [T, H] : {std::pair<int64_t, int64_t>{3, 8}, {5, 7}, {2, 5120}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << T << " H=" << H);
    const float c = 1.0f / std::sqrt(7.0f), r = std::sqrt(6.0f / 7.0f);
    HostTensor branch = test::random_bf16({T, H}, rng, 4.0f),
               w_post = test::random_bf16({H}, rng, 0.3f, 1.0f),
               w_next = test::random_bf16({H}, rng, 0.3f, 1.0f),
               residual = test::random_bf16({T, H}, rng, 1.0f);
    HostTensor want_res = test::copy_of(residual), want_x(DType::kBF16, {T, H});
    post_norm_residual(ctx.one, branch.view, w_post.view, eps, r, c, want_res.view);
    rms_norm(ctx.one, want_res.view, w_next.view, eps, want_x.view);

    HostTensor res = test::copy_of(residual), x(DType::kBF16, {T, H});
    post_norm_residual_norm(ctx.two, branch.view, w_post.view, eps, r, c, res.view, w_next.view,
                            x.view);
    EXPECT_TRUE(test::bits_equal(res.view, want_res.view));
    EXPECT_TRUE(test::bits_equal(x.view, want_x.view));

    HostTensor res2 = test::copy_of(residual), aliased = test::copy_of(branch);
    post_norm_residual_norm(ctx.one, aliased.view, w_post.view, eps, r, c, res2.view,
                            w_next.view, aliased.view);  // out over branch
    EXPECT_TRUE(test::bits_equal(res2.view, want_res.view));
    EXPECT_TRUE(test::bits_equal(aliased.view, want_x.view));
  }
}

}  // namespace
}  // namespace beam
