// linear(): fp32 accumulation in the documented fixed order, one rounding to the output dtype,
// identical results for any M, thread count and tiling, at tiny and at Beam's real shapes.
#include "kernels/api/gemm.h"

#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/gemm.h"

namespace beam {
namespace {

using test::Contexts;

float documented_dot(const TensorView& x, int64_t m, const TensorView& w, int64_t n) {
  return test::documented_dot(test::row_f32(x, m).data(), test::row_f32(w, n).data(), x.dim(1));
}

double exact_dot(const TensorView& x, int64_t m, const TensorView& w, int64_t n, double* abs_sum) {
  const int64_t K = x.dim(1);
  double s = 0, a = 0;
  for (int64_t k = 0; k < K; ++k) {
    double p = double(test::value_at(x, m * K + k)) * double(test::value_at(w, n * K + k));
    s += p;
    a += std::fabs(p);
  }
  *abs_sum = a;
  return s;
}

struct Case {
  int64_t M, K, N;
  DType x, w, out;
};

void check_case(const Case& c, Contexts& ctx, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message()
               << "M=" << c.M << " K=" << c.K << " N=" << c.N << " x=" << dtype_name(c.x)
               << " w=" << dtype_name(c.w) << " out=" << dtype_name(c.out));
  auto make = [&](DType d, Shape s) {
    HostTensor t(d, s);
    test::fill_uniform(t.view, rng(), 1.0f);
    return t;
  };
  HostTensor x = make(c.x, {c.M, c.K}), w = make(c.w, {c.N, c.K});
  HostTensor out1(c.out, {c.M, c.N}), out2(c.out, {c.M, c.N});
  linear(ctx.one, x.view, w.view, out1.view);
  linear(ctx.two, x.view, w.view, out2.view);
  ASSERT_TRUE(test::bits_equal(out1.view, out2.view)) << "1 vs 2 threads differ";

  int64_t checked = 0;
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < c.N; n += (c.N > 600 ? 37 : 1)) {
      const float got = test::value_at(out2.view, m * c.N + n);
      const float order = documented_dot(x.view, m, w.view, n);
      const float want = c.out == DType::kBF16 ? round_bf16(order) : order;
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
          << "m=" << m << " n=" << n;
      double abs_sum;
      const double exact = exact_dot(x.view, m, w.view, n, &abs_sum);
      ASSERT_LE(std::fabs(double(order) - exact), 1e-6 * abs_sum + 1e-30)
          << "fp32 accumulation error";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(Linear, MatchesDocumentedOrderAtTinyShapes) {
  Contexts ctx;
  std::mt19937 rng(1);
  for (int64_t M : {1, 2, 3, 4, 5, 8, 9}) {
    check_case({M, 256, 512, DType::kBF16, DType::kBF16, DType::kBF16}, ctx, rng);
    check_case({M, 131, 37, DType::kBF16, DType::kBF16, DType::kBF16}, ctx, rng);  // odd K, N tails
  }
  check_case({3, 256, 64, DType::kBF16, DType::kBF16, DType::kF32}, ctx, rng);
  check_case({5, 100, 33, DType::kF32, DType::kF32, DType::kF32}, ctx, rng);
  check_case({4, 256, 16, DType::kBF16, DType::kF32, DType::kF32}, ctx, rng);  // fp32 router
  check_case({1, 7, 3, DType::kBF16, DType::kBF16, DType::kBF16}, ctx, rng);   // K < 8
}

TEST(Linear, MatchesDocumentedOrderAtBeamShapes) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  Contexts ctx;
  std::mt19937 rng(2);
  check_case({2, 5120, 1024, DType::kBF16, DType::kBF16, DType::kBF16}, ctx, rng);  // q/k/v/g slice
  check_case({1, 6144, 5120, DType::kBF16, DType::kBF16, DType::kBF16}, ctx, rng);  // o_proj
  check_case({2, 5120, 256, DType::kBF16, DType::kF32, DType::kF32}, ctx, rng);     // router
  check_case({1, 2560, 5120, DType::kBF16, DType::kBF16, DType::kBF16}, ctx, rng);  // expert down
}

// The register-tile path: a row's fp32 result does not depend on M (batched = unbatched).
TEST(Linear, TilePathRowsDoNotDependOnBatchSize) {
  Contexts ctx;
  std::mt19937 rng(3);
  const int64_t K = 320, N = 96;
  HostTensor x = test::random_bf16({37, K}, rng), w = test::random_bf16({N, K}, rng);
  HostTensor all(DType::kF32, {37, N});
  cpu::linear(ctx.pool2, x.view, w.view, all.view, cpu::GemmPath::kTiles);
  for (int64_t m = 0; m < 37; ++m) {
    HostTensor one(DType::kF32, {1, N});
    linear(ctx.one, x.view.rows(m, 1), w.view, one.view);
    ASSERT_TRUE(test::bits_equal(one.view, all.view.rows(m, 1))) << "row " << m;
  }
}

// The OpenBLAS path (M >= kBlasMinRows): fp32 accumulation error as small as the tiles', bf16
// results within one ulp of the tile path, deterministic across thread counts.
TEST(Linear, BlasPathAccuracyAndDeterminism) {
  Contexts ctx;
  for (auto [M, K, N] :
       {std::tuple<int64_t, int64_t, int64_t>{cpu::kBlasMinRows, 256, 200}, {3, 1000, 300}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << M << " K=" << K << " N=" << N);
    HostTensor x(DType::kBF16, {M, K}), w(DType::kBF16, {N, K});
    test::fill_uniform(x.view, 5, 1.0f);
    test::fill_uniform(w.view, 6, 1.0f);
    HostTensor f1(DType::kF32, {M, N}), f2(DType::kF32, {M, N}), b_blas(DType::kBF16, {M, N}),
        b_tiles(DType::kBF16, {M, N});
    cpu::linear(ctx.pool1, x.view, w.view, f1.view, cpu::GemmPath::kBlas);
    cpu::linear(ctx.pool2, x.view, w.view, f2.view, cpu::GemmPath::kBlas);
    ASSERT_TRUE(test::bits_equal(f1.view, f2.view)) << "1 vs 2 threads differ";
    HostTensor f_fast(DType::kF32, {M, N}), f_invariant(DType::kF32, {M, N});
    KernelContext fast = ctx.two;
    fast.batch_invariance = BatchInvariance::kNever;  // OpenBLAS from kBlasMinRows rows on
    linear(fast, x.view, w.view, f_fast.view);
    linear(ctx.two, x.view, w.view, f_invariant.view);  // default: always the tile path
    cpu::linear(ctx.pool2, x.view, w.view, f1.view, cpu::GemmPath::kTiles);
    EXPECT_TRUE(test::bits_equal(f_fast.view, M >= cpu::kBlasMinRows ? f2.view : f1.view));
    EXPECT_TRUE(test::bits_equal(f_invariant.view, f1.view));
    cpu::linear(ctx.pool2, x.view, w.view, b_blas.view, cpu::GemmPath::kBlas);
    cpu::linear(ctx.pool2, x.view, w.view, b_tiles.view, cpu::GemmPath::kTiles);
    int64_t differ = 0;
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double abs_sum;
        const double exact = exact_dot(x.view, m, w.view, n, &abs_sum);
        ASSERT_LE(std::fabs(f2.as<float>()[m * N + n] - exact), 1e-6 * abs_sum) << m << "," << n;
        const float a = to_float(b_blas.as<bf16>()[m * N + n]),
                    b = to_float(b_tiles.as<bf16>()[m * N + n]);
        ASSERT_LE(test::bf16_ulps(a, b), 1);
        differ += a != b;
      }
    }
    EXPECT_LT(differ, M * N / 100);
  }
}

TEST(Linear, RoundsOnceToBf16) {
  // 1 + 2^-8 + 2^-9 (one fp32 sum) rounds up to 1 + 2^-7; rounding partial sums to bf16 first
  // would give 1 (each term alone is below half an ulp).
  Contexts ctx;
  HostTensor x(DType::kBF16, {1, 3}), w(DType::kBF16, {1, 3}), out(DType::kBF16, {1, 1});
  const float xs[3] = {1.0f, 1.0f / 256, 1.0f / 512};
  for (int i = 0; i < 3; ++i) {
    x.as<bf16>()[i] = to_bf16(xs[i]);
    w.as<bf16>()[i] = to_bf16(1.0f);
  }
  linear(ctx.two, x.view, w.view, out.view);
  EXPECT_EQ(to_float(out.as<bf16>()[0]), 1.0f + 1.0f / 128);
}

// linear_split = one linear() per consecutive row range of w, bit for bit: the q/k/v/gate split of
// Beam's packed projection, uneven and empty ranges, bf16 and f32 outputs, both GEMM paths.
TEST(LinearSplit, EqualsLinearPerRowRange) {
  Contexts ctx;
  std::mt19937 rng(21);
  struct SplitCase {
    int64_t M, K;
    std::vector<int64_t> widths;
    DType out;
  };
  const SplitCase cases[] = {{1, 64, {48, 8, 8, 48}, DType::kBF16},   // tiny q/k/v/gate
                             {3, 37, {5, 0, 11, 1}, DType::kF32},     // odd K, an empty range
                             {9, 128, {64, 32}, DType::kBF16},
                             {130, 96, {40, 24, 24, 40}, DType::kBF16}};  // OpenBLAS path (kAuto)
  for (const SplitCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "M=" << c.M << " K=" << c.K);
    int64_t N = 0;
    for (int64_t n : c.widths) N += n;
    HostTensor x = test::random_bf16({c.M, c.K}, rng), w = test::random_bf16({N, c.K}, rng);
    std::vector<HostTensor> split, want;
    std::vector<TensorView> outs;
    int64_t row0 = 0;
    for (int64_t n : c.widths) {
      split.emplace_back(c.out, Shape{c.M, n});
      want.emplace_back(c.out, Shape{c.M, n});
      outs.push_back(split.back().view);
      linear(ctx.two, x.view, w.view.rows(row0, n), want.back().view);
      row0 += n;
    }
    linear_split(ctx.two, x.view, w.view, outs);
    for (size_t i = 0; i < outs.size(); ++i)
      EXPECT_TRUE(test::bits_equal(split[i].view, want[i].view)) << "output " << i;
  }
}

}  // namespace
}  // namespace beam
