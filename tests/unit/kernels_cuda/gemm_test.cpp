// CUDA linear() against the CPU reference op: bf16 GEMMs at M = 0, 1, 7, 300 (tiny, odd and Beam
// widths), bf16 -> f32 output, the exact fp32 router GEMM with bf16 or f32 x, and the skinny
// small-M kernel (forced) at M = 1, 2, 3, 7, 16 with its batch invariance; linear_split on each
// of its three paths.
#include "kernels/api/gemm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda_test_util.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/gemm.h"
#endif

namespace beam {
namespace {

class LinearCuda : public test::CudaTest {
 protected:
  // Runs linear on both devices for x [M, K] (x_dtype) and w [N, K] (w_dtype) into out_dtype;
  // returns (gpu, cpu) outputs.
  // skinny: the small-M kernel forced (cuda::linear_skinny) instead of linear()'s choice.
  std::pair<HostTensor, HostTensor> run_both(int64_t M, int64_t N, int64_t K, DType x_dtype,
                                             DType w_dtype, DType out_dtype, uint64_t seed,
                                             bool skinny = false) {
    HostTensor x(x_dtype, {M, K}), w(w_dtype, {N, K});
    test::fill_uniform(x.view, seed, 2.0f);
    test::fill_uniform(w.view, seed + 7, 1.0f / std::sqrt(float(K)));
    HostTensor want(out_dtype, {M, N});
    linear(cpu.two, x.view, w.view, want.view);
    const TensorView out = device_tensor(out_dtype, {M, N});
    if (skinny) {
#if BEAMSERVE_CUDA
      cuda::linear_skinny(*gpu.cuda, upload(x), upload(w), out);
#endif
    } else {
      linear(gpu, upload(x), upload(w), out);
    }
    return {download(out), std::move(want)};
  }

  // bf16 outputs: fp32 accumulation in another order moves few elements by more than 1 ulp.
  void expect_close_bf16(int64_t M, int64_t N, int64_t K, DType out_dtype, uint64_t seed,
                         bool skinny = false) {
    SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " K " << K
                                      << (skinny ? " skinny" : ""));
    auto [got, want] = run_both(M, N, K, DType::kBF16, DType::kBF16, out_dtype, seed, skinny);
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

// The same shape twice on the cuBLASLt path (M = 33): one cached plan, identical bits.
TEST_F(LinearCuda, PlansAreCachedAndDeterministic) {
  std::mt19937 rng(6);
  HostTensor x = test::random_bf16({33, 512}, rng), w = test::random_bf16({384, 512}, rng);
  const TensorView dx = upload(x), dw = upload(w);
  const TensorView a = device_tensor(DType::kBF16, {33, 384}),
                   b = device_tensor(DType::kBF16, {33, 384});
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

#if BEAMSERVE_CUDA
constexpr int64_t kSkinnySplitRows = cuda::kSkinnyDispatchRows;
constexpr int64_t kPackedSplitRows = cuda::kSplitGemmMaxRows;
#else
constexpr int64_t kSkinnySplitRows = 0, kPackedSplitRows = 0;  // the tests skip without CUDA
#endif

// linear_split on the GPU, close to the CPU op and bit-equal to linear(): at M = 1 (one skinny
// launch) to linear() on each row range of w; above that up to kSplitGemmMaxRows rows with bf16
// outputs of widths % 8 == 0 (one GEMM + column scatter) to the column ranges of linear() over all
// of w; otherwise to linear() per row range.
class LinearSplitCuda : public LinearCuda {
 protected:
  // Columns [col0, col0 + n) of a bf16 [M, N] host tensor.
  static HostTensor columns(const HostTensor& t, int64_t col0, int64_t n) {
    const int64_t M = t.view.dim(0), N = t.view.dim(1);
    HostTensor out(DType::kBF16, {M, n});
    const auto* src = static_cast<const uint16_t*>(t.view.data);
    auto* dst = static_cast<uint16_t*>(out.view.data);
    for (int64_t m = 0; m < M; ++m)
      std::copy(src + m * N + col0, src + m * N + col0 + n, dst + m * n);
    return out;
  }
  static bool packed_path(int64_t M, const std::vector<int64_t>& widths, DType out_dtype) {
    if (M <= kSkinnySplitRows || M > kPackedSplitRows || widths.size() < 2) return false;
    if (out_dtype != DType::kBF16) return false;
    for (int64_t n : widths)
      if (n % 8 != 0) return false;
    return true;
  }
  void check_split(int64_t M, int64_t K, const std::vector<int64_t>& widths, DType out_dtype,
                   uint64_t seed) {
    SCOPED_TRACE(::testing::Message() << "linear_split M " << M << " K " << K << " outputs "
                                      << widths.size() << " " << dtype_name(out_dtype));
    int64_t N = 0;
    for (int64_t n : widths) N += n;
    HostTensor x(DType::kBF16, {M, K}), w(DType::kBF16, {N, K});
    test::fill_uniform(x.view, seed, 2.0f);
    test::fill_uniform(w.view, seed + 7, 1.0f / std::sqrt(float(K)));
    const TensorView dx = upload(x), dw = upload(w);
    std::vector<TensorView> fused, single;
    for (int64_t n : widths) {
      fused.push_back(device_tensor(out_dtype, {M, n}));
      single.push_back(device_tensor(out_dtype, {M, n}));
    }
    linear_split(gpu, dx, dw, fused);
    const bool packed = packed_path(M, widths, out_dtype);
    HostTensor whole;  // linear() over all of w (packed path)
    if (packed) {
      const TensorView all = device_tensor(DType::kBF16, {M, N});
      linear(gpu, dx, dw, all);
      whole = download(all);
    }
    int64_t row0 = 0;
    for (size_t i = 0; i < widths.size(); ++i) {
      linear(gpu, dx, dw.rows(row0, widths[i]), single[i]);
      const HostTensor got = download(fused[i]);
      const HostTensor want = packed ? columns(whole, row0, widths[i]) : download(single[i]);
      EXPECT_TRUE(test::bits_equal(got.view, want.view))
          << "output " << i << " vs linear() " << (packed ? "over all of w" : "on its rows");
      HostTensor ref(out_dtype, {M, widths[i]});
      linear(cpu.two, x.view, w.view.rows(row0, widths[i]), ref.view);
      const test::Diff d = test::compare(got.view, ref.view, 1);
      EXPECT_LT(d.rel, out_dtype == DType::kBF16 ? 8e-3 : 1e-5)
          << "output " << i << " worst element " << d.worst;
      if (out_dtype == DType::kBF16) {
        EXPECT_LE(d.far, ref.view.numel() / 200) << "output " << i;
      }
      row0 += widths[i];
    }
  }
};

// Skinny (1), one GEMM + scatter (2 .. 256) and cuBLASLt per range (> 256).
constexpr int64_t kSplitRows[] = {1, 3, 8, 9, 33, 128, 256, 257};

TEST_F(LinearSplitCuda, TinyOddAndEmptyRanges) {
  for (int64_t M : kSplitRows) {
    check_split(M, 64, {48, 8, 8, 48}, DType::kBF16, 51);  // q, k, v, gate of a tiny model
    // An empty and a 1-row range; odd K (element loads) on the skinny path. cuBLASLt gets 16-byte
    // aligned row ranges (K = 40), as every model shape has.
    check_split(M, M <= kSkinnySplitRows ? 37 : 40, {5, 0, 11, 1, 3}, DType::kBF16, 52);
    check_split(M, 256, {96}, DType::kF32, 53);               // one output, f32
    check_split(M, 72, {1, 2, 3, 4, 5, 6, 7, 8}, DType::kBF16, 54);  // kMaxLinearSplits outputs
  }
}

TEST_F(LinearSplitCuda, BeamQkvg) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  for (int64_t M : {1, 8, 9, 33, 128}) check_split(M, 5120, {6144, 1024, 1024, 6144}, DType::kBF16, 55);
}

// An empty batch writes nothing and queues nothing that fails.
TEST_F(LinearSplitCuda, EmptyBatch) {
  std::mt19937 rng(56);
  HostTensor w = test::random_bf16({24, 16}, rng);
  const std::vector<TensorView> outs = {device_tensor(DType::kBF16, {0, 8}),
                                        device_tensor(DType::kBF16, {0, 16})};
  linear_split(gpu, device_tensor(DType::kBF16, {0, 16}), upload(w), outs);
  synchronize(gpu);
}

#if BEAMSERVE_CUDA
constexpr int64_t kSkinnyRows[] = {1, 2, 3, 7, 16};

TEST_F(LinearCuda, SkinnyTinyAndOddShapes) {
  for (int64_t M : kSkinnyRows) {
    expect_close_bf16(M, 40, 64, DType::kBF16, 31, true);
    expect_close_bf16(M, 33, 72, DType::kBF16, 32, true);    // N odd
    expect_close_bf16(M, 24, 37, DType::kBF16, 33, true);    // K odd: element loads, padded chunk
    expect_close_bf16(M, 5, 1000, DType::kBF16, 34, true);   // K not a multiple of 32 chunks
    expect_close_bf16(M, 9001, 24, DType::kBF16, 35, true);  // two rows per warp, odd N
    expect_close_bf16(M, 96, 256, DType::kF32, 36, true);
  }
}

TEST_F(LinearCuda, SkinnyBeamWidths) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  for (int64_t M : kSkinnyRows) {
    expect_close_bf16(M, 12288 + 2048, 5120, DType::kBF16, 41, true);  // packed q, k, v, gate
    expect_close_bf16(M, 5120, 6144, DType::kBF16, 42, true);          // o_proj
    expect_close_bf16(M, 5120, 17408, DType::kBF16, 43, true);         // dense down
  }
  expect_close_bf16(1, 2 * 17408, 5120, DType::kBF16, 44, true);  // dense gate_up
  expect_close_bf16(1, 151936, 5120, DType::kBF16, 45, true);     // LM head
}

// Row 0 of an M = 7 (and 16) call is bit-equal to the M = 1 call on the same row: out[m, n] is
// summed in one fixed order whatever M is — through linear()'s dispatch and the forced kernel,
// with vector loads (K = 5120) and element loads (K = 37).
TEST_F(LinearCuda, SkinnyIsBatchInvariant) {
  for (auto [N, K] : {std::pair<int64_t, int64_t>{6144, 5120}, {33, 37}, {9001, 64}}) {
    SCOPED_TRACE(::testing::Message() << "N " << N << " K " << K);
    std::mt19937 rng(static_cast<uint32_t>(N + K));
    HostTensor x = test::random_bf16({16, K}, rng), w = test::random_bf16({N, K}, rng);
    const TensorView dx = upload(x), dw = upload(w);
    const TensorView one = device_tensor(DType::kBF16, {1, N});
    linear(gpu, dx.rows(0, 1), dw, one);
    const HostTensor want = download(one);
    for (int64_t M : {int64_t{2}, int64_t{7}, cuda::kSkinnyDispatchRows, int64_t{16}}) {
      const TensorView many = device_tensor(DType::kBF16, {M, N});
      cuda::linear_skinny(*gpu.cuda, dx.rows(0, M), dw, many);
      EXPECT_TRUE(test::bits_equal(download(many).view.rows(0, 1), want.view)) << "M " << M;
      if (M <= cuda::kSkinnyDispatchRows) {
        linear(gpu, dx.rows(0, M), dw, many);
        EXPECT_TRUE(test::bits_equal(download(many).view.rows(0, 1), want.view)) << "M " << M;
      }
    }
  }
}
#endif

}  // namespace
}  // namespace beam
