// CUDA apply_rope and apply_ssmax against the CPU reference (SLEEF's cos/sin/pow, PyTorch's bits).
// The GPU uses CUDA's accurate fp32 cos/sin/pow, so rare bf16-rounded table entries or SSMax
// factors differ; every element must still be the CPU's formula with cos/sin each allowed 1 bf16
// ulp, and at least 99% of elements must be bit-equal (the measured fraction is printed).
#include "kernels/api/rope.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"

namespace beam {
namespace {

using test::bf16_neighbours;
using test::exact_fraction;


// T positions in [0, 10^6]: the edge positions first (0, 1, SSMax's 2047, 10^6 - 1, 10^6), the
// rest random.
HostTensor make_positions(int64_t T, std::mt19937& rng) {
  const int64_t edges[] = {1000000, 0, 1, 2047, 999999};
  HostTensor p(DType::kI64, {T});
  std::uniform_int_distribution<int64_t> dist(0, 1000000);
  for (int64_t t = 0; t < T; ++t) p.as<int64_t>()[t] = t < 5 ? edges[t] : dist(rng);
  return p;
}

class CudaRope : public test::CudaTest {
 protected:
  // Heads of one tensor [T, heads, D] rotated on the GPU (got) vs its input (x): each output is
  // bf16(bf16(x1 * c) + bf16(-x2 * s)) (low half) or bf16(bf16(x2 * c) + bf16(x1 * s)) (high
  // half) for c, s within 1 bf16 ulp of the CPU's table. Returns the count that is not.
  int64_t unexplained(const HostTensor& x, const HostTensor& got, const HostTensor& pos,
                      float theta) {
    const int64_t T = x.view.dim(0), H = x.view.dim(1), D = x.view.dim(2), half = D / 2;
    std::vector<float> cos_d(D), sin_d(D);
    int64_t bad = 0;
    for (int64_t t = 0; t < T; ++t) {
      rope_cos_sin(pos.as<int64_t>()[t], theta, D, cos_d, sin_d);
      for (int64_t h = 0; h < H; ++h) {
        const bf16* in = x.as<bf16>() + (t * H + h) * D;
        const bf16* out = got.as<bf16>() + (t * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = to_float(in[i]), x2 = to_float(in[i + half]);
          bool lo_ok = false, hi_ok = false;
          for (float c : bf16_neighbours(round_bf16(cos_d[i])))
            for (float s : bf16_neighbours(round_bf16(sin_d[i])))
              lo_ok |= round_bf16(round_bf16(x1 * c) + round_bf16(-x2 * s)) == to_float(out[i]);
          for (float c : bf16_neighbours(round_bf16(cos_d[i + half])))
            for (float s : bf16_neighbours(round_bf16(sin_d[i + half])))
              hi_ok |= round_bf16(round_bf16(x2 * c) + round_bf16(x1 * s)) ==
                       to_float(out[i + half]);
          bad += !lo_ok + !hi_ok;
        }
      }
    }
    return bad;
  }

  void check_rope(int64_t T, int64_t Nq, int64_t Nkv, int64_t D, float theta) {
    SCOPED_TRACE(::testing::Message() << "rope T=" << T << " Nq=" << Nq << " Nkv=" << Nkv
                                      << " D=" << D << " theta=" << theta);
    HostTensor q = test::random_bf16({T, Nq, D}, rng_, 1.0f);
    HostTensor k = test::random_bf16({T, Nkv, D}, rng_, 2.0f);
    HostTensor pos = make_positions(T, rng_);
    HostTensor want_q = test::copy_of(q), want_k = test::copy_of(k);
    apply_rope(cpu.one, want_q.view, want_k.view, pos.view, theta);

    const TensorView dq = upload(q), dk = upload(k);
    apply_rope(gpu, dq, dk, upload(pos), theta);
    HostTensor got_q = download(dq), got_k = download(dk);

    EXPECT_EQ(unexplained(q, got_q, pos, theta), 0);
    EXPECT_EQ(unexplained(k, got_k, pos, theta), 0);
    const double exact_q = exact_fraction(got_q.view, want_q.view);
    const double exact_k = exact_fraction(got_k.view, want_k.view);
    EXPECT_GE(exact_q, 0.99);
    EXPECT_GE(exact_k, 0.99);
    const int64_t far = test::compare(got_q.view, want_q.view, 1).far +
                        test::compare(got_k.view, want_k.view, 1).far;
    std::printf("rope T=%lld D=%lld theta=%g: bit-equal q %.6f k %.6f, %lld elements > 1 ulp\n",
                static_cast<long long>(T), static_cast<long long>(D), theta, exact_q, exact_k,
                static_cast<long long>(far));
  }

  void check_ssmax(int64_t T, int64_t Nq, int64_t D) {
    SCOPED_TRACE(::testing::Message() << "ssmax T=" << T << " Nq=" << Nq << " D=" << D);
    HostTensor q = test::random_bf16({T, Nq, D}, rng_, 1.0f);
    HostTensor pos = make_positions(T, rng_);
    HostTensor want = test::copy_of(q);
    apply_ssmax(cpu.one, want.view, pos.view);

    const TensorView dq = upload(q);
    apply_ssmax(gpu, dq, upload(pos));
    HostTensor got = download(dq);

    const test::Diff d = test::compare(got.view, want.view, 1);
    EXPECT_EQ(d.far, 0) << "worst element " << d.worst;
    const double exact = exact_fraction(got.view, want.view);
    EXPECT_GE(exact, 0.99);
    std::printf("ssmax T=%lld width=%lld: %.6f bit-equal to the CPU\n", static_cast<long long>(T),
                static_cast<long long>(Nq * D), exact);
  }

  std::mt19937 rng_{777};
};

TEST_F(CudaRope, TinyAndScalarHeads) {
  check_rope(3, 2, 1, 16, 10000.0f);  // half = 8: 8-wide path
  check_rope(6, 3, 2, 8, 10000.0f);   // half = 4: scalar path
  check_rope(5, 2, 1, 6, 1000000.0f); // odd half
}

TEST_F(CudaRope, BeamHeadsAtPositionsUpToOneMillion) {
  for (float theta : {10000.0f, 1000000.0f})
    for (int64_t T : {1, 7, 300}) check_rope(T, 48, 8, 128, theta);
}

TEST_F(CudaRope, SsmaxTinyAndBeamHeads) {
  check_ssmax(6, 3, 5);  // odd width: scalar path
  check_ssmax(5, 2, 8);
  for (int64_t T : {1, 7, 300}) check_ssmax(T, 48, 128);
  check_ssmax(2048, 4, 8);  // many distinct positions
}

}  // namespace
}  // namespace beam
