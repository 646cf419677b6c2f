// CUDA linear() against the CPU reference op: bf16 GEMMs at M = 0, 1, 7, 300 (tiny, odd and Beam
// widths), bf16 -> f32 output, and the exact fp32 router GEMM with bf16 or f32 x.
#include "kernels/api/gemm.h"

#include "cuda_test_util.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/cuda_context.h"
#endif

namespace beam {
namespace {

class LinearCuda : public test::CudaTest {
 protected:
  // Runs linear on both devices for x [M, K] (x_dtype) and w [N, K] (w_dtype) into out_dtype;
  // returns (gpu, cpu) outputs.
  std::pair<HostTensor, HostTensor> run_both(int64_t M, int64_t N, int64_t K, DType x_dtype,
                                             DType w_dtype, DType out_dtype, uint64_t seed) {
    HostTensor x(x_dtype, {M, K}), w(w_dtype, {N, K});
    test::fill_uniform(x.view, seed, 2.0f);
    test::fill_uniform(w.view, seed + 7, 1.0f / std::sqrt(float(K)));
    HostTensor want(out_dtype, {M, N});
    linear(cpu.two, x.view, w.view, want.view);
    const TensorView out = device_tensor(out_dtype, {M, N});
    linear(gpu, upload(x), upload(w), out);
    return {download(out), std::move(want)};
  }

  // bf16 outputs: fp32 accumulation in another order moves few elements by more than 1 ulp.
  void expect_close_bf16(int64_t M, int64_t N, int64_t K, DType out_dtype, uint64_t seed) {
    SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " K " << K);
    auto [got, want] = run_both(M, N, K, DType::kBF16, DType::kBF16, out_dtype, seed);
    const test::Diff d = test::compare(got.view, want.view, 1);
    std::cout << "linear bf16 M " << M << " N " << N << " K " << K << ": max rel err " << d.rel
              << ", " << d.far << " of " << want.view.numel() << " elements > 1 ulp\n";
    EXPECT_LT(d.rel, out_dtype == DType::kBF16 ? 8e-3 : 1e-5) << "worst element " << d.worst;
    if (out_dtype == DType::kBF16) {
      EXPECT_LE(d.far, want.view.numel() / 200) << "more than 0.5% of elements > 1 bf16 ulp off";
    }
  }
};

TEST_F(LinearCuda, Bf16TinyAndOddShapes) {
  for (int64_t M : {1, 7, 300}) {
    expect_close_bf16(M, 40, 64, DType::kBF16, 1);
    expect_close_bf16(M, 33, 72, DType::kBF16, 2);   // N odd
    expect_close_bf16(M, 24, 37, DType::kBF16, 3);   // K odd: unaligned rows
  }
}

TEST_F(LinearCuda, Bf16ToF32) {
  for (int64_t M : {1, 7, 300}) expect_close_bf16(M, 96, 256, DType::kF32, 4);
}

TEST_F(LinearCuda, Bf16BeamWidths) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  for (int64_t M : {1, 7}) {
    expect_close_bf16(M, 12288 + 2048, 5120, DType::kBF16, 11);  // packed q, k, v, gate
    expect_close_bf16(M, 5120, 6144, DType::kBF16, 12);          // o_proj
    expect_close_bf16(M, 2 * 17408, 5120, DType::kBF16, 13);     // dense gate_up
  }
  expect_close_bf16(300, 2048, 5120, DType::kBF16, 14);
  expect_close_bf16(300, 5120, 2560, DType::kBF16, 15);  // expert down projection
  expect_close_bf16(1, 151936, 5120, DType::kBF16, 16);  // LM head
}

// BEAM.md §3.10 step 1: fp32 GEMM on exactly widened operands; only the summation order differs.
TEST_F(LinearCuda, Fp32Router) {
  for (DType x_dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t M : {1, 7, 300}) {
      for (auto [N, K] : {std::pair<int64_t, int64_t>{16, 64}, {256, 5120}}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(x_dtype) << " M " << M << " N " << N);
        auto [got, want] = run_both(M, N, K, x_dtype, DType::kF32, DType::kF32, 21 + M);
        const test::Diff d = test::compare(got.view, want.view);
        std::cout << "router " << dtype_name(x_dtype) << " M " << M << " N " << N << " K " << K
                  << ": max rel err " << d.rel << "\n";
        EXPECT_LT(d.rel, 1e-5) << "worst element " << d.worst << " (TF32 would give ~1e-3)";
      }
    }
  }
}

TEST_F(LinearCuda, EmptyBatchWritesNothing) {
  std::mt19937 rng(5);
  HostTensor w = test::random_bf16({8, 16}, rng);
  const TensorView x = device_tensor(DType::kBF16, {0, 16});
  const TensorView out = device_tensor(DType::kBF16, {0, 8});
  linear(gpu, x, upload(w), out);
  synchronize(gpu);
  EXPECT_EQ(download(out).view.numel(), 0);
}

// The same shape twice: one cached plan, identical bits.
TEST_F(LinearCuda, PlansAreCachedAndDeterministic) {
  std::mt19937 rng(6);
  HostTensor x = test::random_bf16({7, 512}, rng), w = test::random_bf16({384, 512}, rng);
  const TensorView dx = upload(x), dw = upload(w);
  const TensorView a = device_tensor(DType::kBF16, {7, 384}),
                   b = device_tensor(DType::kBF16, {7, 384});
  linear(gpu, dx, dw, a);
#if BEAMSERVE_CUDA
  const size_t plans = gpu.cuda->linear.plans.size();
  linear(gpu, dx, dw, b);
  EXPECT_EQ(gpu.cuda->linear.plans.size(), plans);
#else
  linear(gpu, dx, dw, b);
#endif
  EXPECT_TRUE(test::bits_equal(download(a).view, download(b).view));
}

}  // namespace
}  // namespace beam
