// CUDA rms_norm and post_norm_residual against the CPU reference: at most 1 bf16 ulp apart (the
// fp32 sum of squares is reduced in another order), nearly all elements bit-equal, in place, on
// narrow (warp-per-row) and wide (block-per-row) rows, 8-wide and scalar paths.
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

}  // namespace
}  // namespace beam
