// Output gate, SwiGLU, softcap and embedding: exact rounding points (BEAM.md §3.7, §3.9, §3.11).
#include "kernels/api/activation.h"

#include "kernel_test_util.h"
#include "kernels/cpu/torch_math.h"

namespace beam {
namespace {

using test::Contexts;

TEST(OutputGate, RoundsAfterBiasAfterSigmoidAndAfterProduct) {
  Contexts ctx;
  std::mt19937 rng(21);
  for (auto [T, Nq, D] : {std::tuple<int64_t, int64_t, int64_t>{5, 4, 128}, {2, 48, 128}}) {
    HostTensor o = test::random_bf16({T, Nq * D}, rng),
               g = test::random_bf16({T, Nq * D}, rng, 2.0f);
    HostTensor bias = test::random_bf16({Nq}, rng, 1.0f);
    HostTensor o1 = test::copy_of(o), o2 = test::copy_of(o);
    output_gate(ctx.one, o1.view, g.view, bias.view);
    output_gate(ctx.two, o2.view, g.view, bias.view);
    ASSERT_TRUE(test::bits_equal(o1.view, o2.view));
    int64_t unrounded_differs = 0;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j < Nq * D; ++j) {
        const int64_t i = t * Nq * D + j;
        const float b = to_float(bias.as<bf16>()[j / D]);  // per-head bias, broadcast over D
        const float gv = to_float(g.as<bf16>()[i]), ov = to_float(o.as<bf16>()[i]);
        const float s = round_bf16(cpu::torch_sigmoidf(round_bf16(gv + b)));
        ASSERT_EQ(o2.as<bf16>()[i].bits, to_bf16(ov * s).bits) << "t " << t << " j " << j;
        unrounded_differs +=
            to_bf16(ov * cpu::torch_sigmoidf(gv + b)).bits != o2.as<bf16>()[i].bits;
      }
    }
    EXPECT_GT(unrounded_differs, 0);
  }
}

TEST(Swiglu, RoundsOnceAfterFp32SiluTimesUp) {
  Contexts ctx;
  std::mt19937 rng(22);
  const int64_t T = 7, I = 320;
  HostTensor gu = test::random_bf16({T, 2 * I}, rng, 2.0f);
  HostTensor a1(DType::kBF16, {T, I}), a2(DType::kBF16, {T, I});
  swiglu(ctx.one, gu.view, a1.view);
  swiglu(ctx.two, gu.view, a2.view);
  ASSERT_TRUE(test::bits_equal(a1.view, a2.view));
  int64_t rounded_silu_differs = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < I; ++i) {
      const float g = to_float(gu.as<bf16>()[t * 2 * I + i]),
                  u = to_float(gu.as<bf16>()[t * 2 * I + I + i]);
      const bf16 want = to_bf16(cpu::torch_siluf(g) * u);
      ASSERT_EQ(a2.as<bf16>()[t * I + i].bits, want.bits);
      const double exact = g / (1.0 + std::exp(-double(g))) * u;
      ASSERT_LE(test::bf16_ulps(to_float(want), float(exact)), 1);
      rounded_silu_differs += to_bf16(round_bf16(cpu::torch_siluf(g)) * u).bits != want.bits;
    }
  }
  EXPECT_GT(rounded_silu_differs, 0);
}

TEST(Softcap, CapsInFp32AndPassesThroughWithoutCap) {
  Contexts ctx;
  std::mt19937 rng(23);
  const int64_t T = 3, V = 1000;
  HostTensor z = test::random_bf16({T, V}, rng, 40.0f);
  HostTensor l1(DType::kF32, {T, V}), l2(DType::kF32, {T, V}), raw(DType::kF32, {T, V});
  HostTensor scaled(DType::kF32, {T, V}), scaled_raw(DType::kF32, {T, V});
  softcap(ctx.one, z.view, 30.0f, 1.0f, l1.view);
  softcap(ctx.two, z.view, 30.0f, 1.0f, l2.view);
  softcap(ctx.two, z.view, 0.0f, 1.0f, raw.view);
  softcap(ctx.two, z.view, 30.0f, 0.5f, scaled.view);  // a drafter's output_multiplier
  softcap(ctx.two, z.view, 0.0f, 0.5f, scaled_raw.view);
  ASSERT_TRUE(test::bits_equal(l1.view, l2.view));
  int saturated = 0;
  for (int64_t i = 0; i < T * V; ++i) {
    const float zv = to_float(z.as<bf16>()[i]);
    ASSERT_EQ(l2.as<float>()[i], 30.0f * cpu::torch_tanhf(zv / 30.0f));
    ASSERT_NEAR(l2.as<float>()[i], 30.0 * std::tanh(zv / 30.0), 1e-5);
    ASSERT_LE(std::fabs(l2.as<float>()[i]), 30.0f);
    ASSERT_EQ(raw.as<float>()[i], zv);
    ASSERT_EQ(scaled.as<float>()[i], 30.0f * cpu::torch_tanhf(zv * 0.5f / 30.0f));
    ASSERT_EQ(scaled_raw.as<float>()[i], zv * 0.5f);
    saturated += std::fabs(zv) > 60.0f;
  }
  EXPECT_GT(saturated, 0);
}

TEST(AddRounded, RoundsTheFp32SumOnceInPlace) {
  Contexts ctx;
  std::mt19937 rng(25);
  HostTensor a = test::random_bf16({5, 300}, rng), b = test::random_bf16({5, 300}, rng);
  HostTensor want(DType::kBF16, {5, 300});
  for (int64_t i = 0; i < a.view.numel(); ++i)
    want.as<bf16>()[i] = to_bf16(to_float(a.as<bf16>()[i]) + to_float(b.as<bf16>()[i]));
  add_rounded(ctx.two, a.view, b.view, a.view);  // out aliases a
  EXPECT_TRUE(test::bits_equal(a.view, want.view));
}

TEST(Embedding, GathersRows) {
  Contexts ctx;
  std::mt19937 rng(24);
  const int64_t V = 50, H = 40;
  HostTensor table = test::random_bf16({V, H}, rng), ids(DType::kI32, {4}),
             out(DType::kBF16, {4, H});
  const int32_t want[4] = {3, 0, 49, 3};
  std::copy_n(want, 4, ids.as<int32_t>());
  embedding(ctx.two, table.view, ids.view, out.view);
  for (int t = 0; t < 4; ++t)
    EXPECT_TRUE(test::bits_equal(out.view.rows(t, 1), table.view.rows(want[t], 1))) << t;
}

TEST(EmbeddingDeathTest, RejectsIdOutsideTable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Contexts ctx;
  HostTensor table(DType::kBF16, {10, 8}), ids(DType::kI32, {1}), out(DType::kBF16, {1, 8});
  ids.as<int32_t>()[0] = 10;
  EXPECT_DEATH(embedding(ctx.one, table.view, ids.view, out.view), "token id 10");
}

TEST(KernelDispatchDeathTest, CudaDeviceFailsClearly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  KernelContext cuda{Device::kCuda, nullptr};
  HostTensor z(DType::kBF16, {1, 4}), l(DType::kF32, {1, 4});
  z.view.device = Device::kCuda;
  l.view.device = Device::kCuda;
  // Without the backend the dispatch says so; with it, the missing CUDA context is named.
  EXPECT_DEATH(softcap(cuda, z.view, 30.0f, 1.0f, l.view),
               "CUDA backend is not built|without a CUDA context");
}

}  // namespace
}  // namespace beam
