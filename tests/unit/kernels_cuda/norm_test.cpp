// CUDA rms_norm and post_norm_residual against the CPU reference: at most 1 bf16 ulp apart (the
// fp32 sum of squares is reduced in another order), nearly all elements bit-equal, in place, on
// narrow (warp-per-row) and wide (block-per-row) rows, 8-wide and scalar paths; the fused
// post_norm_residual_norm bit-equal to the two GPU ops.
#include "kernels/api/norm.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <random>

#include "cuda_test_util.h"

namespace beam {
namespace {

using test::bf16_neighbours;
using test::exact_fraction;

constexpr float kEps = 1e-6f;


class CudaNorm : public test::CudaTest {
 protected:
  // x [rows, n]; in_place writes the output over x; offset_elems shifts x off 16-byte alignment.
  void check_rms_norm(int64_t rows, int64_t n, bool in_place, int64_t offset_elems = 0) {
    SCOPED_TRACE(::testing::Message() << "rms_norm rows=" << rows << " n=" << n
                                      << " in_place=" << in_place << " offset=" << offset_elems);
    HostTensor x = test::random_bf16({rows, n}, rng_, 3.0f, 0.5f);
    HostTensor w = test::random_bf16({n}, rng_, 0.3f, 1.0f);
    HostTensor want(DType::kBF16, {rows, n});
    rms_norm(cpu.one, x.view, w.view, kEps, want.view);

    TensorView dx;
    if (offset_elems == 0) {
      dx = upload(x);
    } else {  // the same values at an address 2 * offset_elems bytes past an aligned one
      HostTensor padded(DType::kBF16, {rows * n + offset_elems});
      std::memcpy(padded.as<bf16>() + offset_elems, x.as<bf16>(), x.view.nbytes());
      dx = upload(padded);
      dx.data = static_cast<bf16*>(dx.data) + offset_elems;
      dx.shape = Shape{rows, n};
    }
    const TensorView dout = in_place ? dx : device_tensor(DType::kBF16, {rows, n});
    rms_norm(gpu, dx, upload(w), kEps, dout);
    HostTensor got = download(dout);

    const test::Diff d = test::compare(got.view, want.view, 1);
    EXPECT_EQ(d.far, 0) << "worst element " << d.worst << ": " << test::value_at(got.view, d.worst)
                        << " vs " << test::value_at(want.view, d.worst);
    const double exact = exact_fraction(got.view, want.view);
    EXPECT_GE(exact, 0.99);
    std::printf("rms_norm [%lld, %lld]: %.5f of elements bit-equal to the CPU\n",
                static_cast<long long>(rows), static_cast<long long>(n), exact);
  }

  // branch, residual [T, H]; r, c of depth-scaled residual unit idx (BEAM.md §3.8).
  void check_post_norm_residual(int64_t T, int64_t H, int idx) {
    SCOPED_TRACE(::testing::Message() << "post_norm_residual T=" << T << " H=" << H
                                      << " idx=" << idx);
    const float c = 1.0f / std::sqrt(float(idx)), r = std::sqrt(float(idx - 1) / float(idx));
    HostTensor branch = test::random_bf16({T, H}, rng_, 5.0f, 1.0f);
    HostTensor w = test::random_bf16({H}, rng_, 0.3f, 1.0f);
    HostTensor residual = test::random_bf16({T, H}, rng_, 1.0f);
    HostTensor want = test::copy_of(residual), y(DType::kBF16, {T, H});
    post_norm_residual(cpu.one, branch.view, w.view, kEps, r, c, want.view);
    rms_norm(cpu.one, branch.view, w.view, kEps, y.view);  // the CPU's rounded norm output

    const TensorView dres = upload(residual);
    post_norm_residual(gpu, upload(branch), upload(w), kEps, r, c, dres);
    HostTensor got = download(dres);

    // Every element is the CPU's formula, with the norm output y allowed 1 ulp either way (its
    // fp32 sum of squares is reduced in another order); the other rounding points are exact.
    int64_t unexplained = 0;
    for (int64_t i = 0; i < T * H; ++i) {
      const float res = to_float(residual.as<bf16>()[i]), g = to_float(got.as<bf16>()[i]);
      bool ok = false;
      for (float yv : bf16_neighbours(to_float(y.as<bf16>()[i])))
        ok |= round_bf16(round_bf16(res * r) + round_bf16(yv * c)) == g;
      unexplained += !ok;
    }
    EXPECT_EQ(unexplained, 0);
    const double exact = exact_fraction(got.view, want.view);
    EXPECT_GE(exact, 0.99);
    std::printf("post_norm_residual [%lld, %lld] idx %d: %.5f bit-equal to the CPU\n",
                static_cast<long long>(T), static_cast<long long>(H), idx, exact);
  }

  // post_norm_residual_norm on the GPU against the two GPU ops it fuses (bit for bit: residual
  // and x), and against the CPU: the residual as in check_post_norm_residual, x as rms_norm of
  // the GPU's residual on the CPU (at most 1 ulp, 99% bit-equal). alias_out: x over branch.
  void check_post_norm_residual_norm(int64_t T, int64_t H, int idx, bool alias_out = false) {
    SCOPED_TRACE(::testing::Message() << "post_norm_residual_norm T=" << T << " H=" << H
                                      << " idx=" << idx << " alias_out=" << alias_out);
    const float c = 1.0f / std::sqrt(float(idx)), r = std::sqrt(float(idx - 1) / float(idx));
    HostTensor branch = test::random_bf16({T, H}, rng_, 5.0f, 1.0f);
    HostTensor w_post = test::random_bf16({H}, rng_, 0.3f, 1.0f);
    HostTensor w_next = test::random_bf16({H}, rng_, 0.3f, 1.0f);
    HostTensor residual = test::random_bf16({T, H}, rng_, 1.0f);
    const TensorView dw_post = upload(w_post), dw_next = upload(w_next);

    // The unfused GPU ops.
    const TensorView res_ref = upload(residual), x_ref = device_tensor(DType::kBF16, {T, H});
    post_norm_residual(gpu, upload(branch), dw_post, kEps, r, c, res_ref);
    rms_norm(gpu, res_ref, dw_next, kEps, x_ref);

    const TensorView dbranch = upload(branch), dres = upload(residual);
    const TensorView dx = alias_out ? dbranch : device_tensor(DType::kBF16, {T, H});
    post_norm_residual_norm(gpu, dbranch, dw_post, kEps, r, c, dres, dw_next, dx);
    const HostTensor got_res = download(dres), got_x = download(dx);
    EXPECT_TRUE(test::bits_equal(got_res.view, download(res_ref).view)) << "residual vs unfused";
    EXPECT_TRUE(test::bits_equal(got_x.view, download(x_ref).view)) << "x vs unfused";

    HostTensor want_res = test::copy_of(residual), y(DType::kBF16, {T, H});
    post_norm_residual(cpu.one, branch.view, w_post.view, kEps, r, c, want_res.view);
    rms_norm(cpu.one, branch.view, w_post.view, kEps, y.view);
    int64_t unexplained = 0;
    for (int64_t i = 0; i < T * H; ++i) {
      const float res = to_float(residual.as<bf16>()[i]), g = to_float(got_res.as<bf16>()[i]);
      bool ok = false;
      for (float yv : bf16_neighbours(to_float(y.as<bf16>()[i])))
        ok |= round_bf16(round_bf16(res * r) + round_bf16(yv * c)) == g;
      unexplained += !ok;
    }
    EXPECT_EQ(unexplained, 0);
    EXPECT_GE(exact_fraction(got_res.view, want_res.view), 0.99);
    HostTensor want_x(DType::kBF16, {T, H});
    rms_norm(cpu.one, got_res.view, w_next.view, kEps, want_x.view);
    const test::Diff d = test::compare(got_x.view, want_x.view, 1);
    EXPECT_EQ(d.far, 0) << "worst element " << d.worst;
    const double exact = exact_fraction(got_x.view, want_x.view);
    EXPECT_GE(exact, 0.99);
    std::printf("post_norm_residual_norm [%lld, %lld]: x %.5f bit-equal to the CPU\n",
                static_cast<long long>(T), static_cast<long long>(H), exact);
  }

  std::mt19937 rng_{20240607};
};

TEST_F(CudaNorm, RmsNormTinyAndOddWidths) {
  check_rms_norm(3, 8, false);      // warp per row, 8-wide
  check_rms_norm(5, 7, false);      // warp per row, scalar
  check_rms_norm(2, 1001, false);   // widest warp-per-row width class, scalar
  check_rms_norm(3, 2048, false);   // block per row, 8-wide
  check_rms_norm(4, 3001, false);   // block per row, scalar
  check_rms_norm(6, 128, false, 1);     // unaligned view: scalar path
  check_rms_norm(2, 5120, true, 3);     // unaligned and in place
}

TEST_F(CudaNorm, RmsNormBeamWidths) {
  for (int64_t T : {1, 7, 300}) {
    check_rms_norm(T, 5120, false);       // hidden-state norms
    check_rms_norm(T * 48, 128, false);   // q_norm per head
    check_rms_norm(T * 8, 128, false);    // k_norm per head
  }
}

TEST_F(CudaNorm, RmsNormInPlace) {
  check_rms_norm(7, 5120, true);
  check_rms_norm(7 * 48, 128, true);
  check_rms_norm(3, 7, true);
}

TEST_F(CudaNorm, PostNormResidualKeepsEveryRoundingPoint) {
  check_post_norm_residual(3, 8, 2);
  check_post_norm_residual(5, 7, 3);
  check_post_norm_residual(2, 3001, 50);
  for (int64_t T : {1, 7, 300}) {
    check_post_norm_residual(T, 5120, 2);    // layer 0 attention: r = c = 0.70711
    check_post_norm_residual(T, 5120, 105);  // layer 51 MLP: c = 0.097590, r = 0.995227
  }
}

// The fused kernel (8-wide aligned rows: warp rows at H <= 1024, block rows with 1 or 2 packs per
// thread) and the two-op fallback (odd widths, more packs per thread) at the decode and prefill
// batch sizes around the small-batch thresholds.
TEST_F(CudaNorm, PostNormResidualNormEqualsTheTwoOps) {
  for (int64_t T : {1, 3, 8, 9, 33}) {
    check_post_norm_residual_norm(T, 5120, 2);    // Beam hidden: 320 threads x 2 packs
    check_post_norm_residual_norm(T, 5120, 105);
    check_post_norm_residual_norm(T, 64, 7);      // warp rows
    check_post_norm_residual_norm(T, 2048, 9);    // block rows, 1 pack per thread
    check_post_norm_residual_norm(T, 7, 3);       // scalar: the two ops
    check_post_norm_residual_norm(T, 12288, 4);   // 3 packs per thread: the two ops
  }
  check_post_norm_residual_norm(300, 5120, 50);
  check_post_norm_residual_norm(3, 5120, 2, true);  // x written over branch
  check_post_norm_residual_norm(3, 64, 2, true);
}

// rms_norm at widths whose packs per thread take each cached-kernel instance (1, 2, 4) and the
// general 8-wide kernel past kMaxCachedPacks (17408: 5 per thread).
TEST_F(CudaNorm, RmsNormCachedAndGeneralWidths) {
  for (int64_t n : {256, 1024, 2048, 5120, 12288, 16384, 17408}) check_rms_norm(3, n, false);
  check_rms_norm(1, 5120, true);
  check_rms_norm(1, 17408, true);
}

}  // namespace
}  // namespace beam
