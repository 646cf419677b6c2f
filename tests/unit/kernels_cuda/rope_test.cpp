// CUDA apply_rope and apply_ssmax against the CPU reference (SLEEF's cos/sin/pow, PyTorch's bits).
// The GPU uses CUDA's accurate fp32 cos/sin/pow, so rare bf16-rounded table entries or SSMax
// factors differ; every element must still be the CPU's formula with cos/sin each allowed 1 bf16
// ulp, and at least 99% of elements must be bit-equal (the measured fraction is printed). The fused
// q/k norm + RoPE / SSMax ops (and their *_store_kv forms, + store_kv) must equal the GPU's unfused
// ops bit for bit.
#include "kernels/api/rope.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/api/attention.h"
#include "kernels/api/norm.h"

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

  // qk_norm_rope (rope) or qk_norm_ssmax on the GPU: bit-equal to rms_norm (q and k per head) +
  // apply_rope / apply_ssmax on the GPU, and near the CPU's fused op (bf16-level error, 99%
  // bit-equal from 4096 elements on: the norms' fp32 sums and cos/sin/pow are the differences).
  void check_qk(int64_t T, int64_t Nq, int64_t Nkv, int64_t D, bool rope, float theta = 1e6f) {
    SCOPED_TRACE(::testing::Message() << (rope ? "qk_norm_rope" : "qk_norm_ssmax") << " T=" << T
                                      << " Nq=" << Nq << " Nkv=" << Nkv << " D=" << D);
    constexpr float kEps = 1e-6f;
    HostTensor q = test::random_bf16({T, Nq, D}, rng_, 3.0f);
    HostTensor k = test::random_bf16({T, Nkv, D}, rng_, 3.0f);
    HostTensor q_norm = test::random_bf16({D}, rng_, 0.3f, 1.0f);
    HostTensor k_norm = test::random_bf16({D}, rng_, 0.3f, 1.0f);
    HostTensor pos = make_positions(T, rng_);
    const TensorView dq_norm = upload(q_norm), dk_norm = upload(k_norm), dpos = upload(pos);

    const TensorView uq = upload(q), uk = upload(k);  // the unfused GPU ops
    rms_norm(gpu, uq.reshape({T * Nq, D}), dq_norm, kEps, uq.reshape({T * Nq, D}));
    rms_norm(gpu, uk.reshape({T * Nkv, D}), dk_norm, kEps, uk.reshape({T * Nkv, D}));
    if (rope) {
      apply_rope(gpu, uq, uk, dpos, theta);
    } else {
      apply_ssmax(gpu, uq, dpos);
    }

    const TensorView dq = upload(q), dk = upload(k);
    const QkTensors qk{dq, dk, dq_norm, dk_norm, dpos};
    if (rope) {
      qk_norm_rope(gpu, qk, kEps, theta);
    } else {
      qk_norm_ssmax(gpu, qk, kEps);
    }
    const HostTensor got_q = download(dq), got_k = download(dk);
    EXPECT_TRUE(test::bits_equal(got_q.view, download(uq).view)) << "q vs the unfused ops";
    EXPECT_TRUE(test::bits_equal(got_k.view, download(uk).view)) << "k vs the unfused ops";

    HostTensor want_q = test::copy_of(q), want_k = test::copy_of(k);
    const QkTensors cpu_qk{want_q.view, want_k.view, q_norm.view, k_norm.view, pos.view};
    if (rope) {
      qk_norm_rope(cpu.one, cpu_qk, kEps, theta);
    } else {
      qk_norm_ssmax(cpu.one, cpu_qk, kEps);
    }
    const double exact_q = exact_fraction(got_q.view, want_q.view);
    const double exact_k = exact_fraction(got_k.view, want_k.view);
    if (want_q.view.numel() >= 4096) {  // a fraction worth measuring
      EXPECT_GE(exact_q, 0.99);
    }
    if (want_k.view.numel() >= 4096) {
      EXPECT_GE(exact_k, 0.99);
    }
    EXPECT_LT(test::compare(got_q.view, want_q.view).rel, 8e-3);
    EXPECT_LT(test::compare(got_k.view, want_k.view).rel, 8e-3);
    std::printf("%s T=%lld D=%lld: bit-equal to the CPU q %.6f k %.6f\n",
                rope ? "qk_norm_rope" : "qk_norm_ssmax", static_cast<long long>(T),
                static_cast<long long>(D), exact_q, exact_k);
  }

  // qk_norm_rope / qk_norm_ssmax with a KV store on the GPU: q, k and the pool bit-equal to
  // the GPU's qk_norm_rope / qk_norm_ssmax then store_kv, with a pool of num_blocks x block_size
  // slots (random contents), distinct random slots and every third row's slot -1.
  void check_qk_store(int64_t T, int64_t Nq, int64_t Nkv, int64_t D, bool rope,
                      int64_t num_blocks, int64_t block_size) {
    SCOPED_TRACE(::testing::Message() << (rope ? "qk_norm_rope + store" : "qk_norm_ssmax + store")
                                      << " T=" << T << " Nq=" << Nq << " Nkv=" << Nkv << " D=" << D
                                      << " pool " << num_blocks << "x" << block_size);
    constexpr float kEps = 1e-6f, kTheta = 1e6f;
    HostTensor q = test::random_bf16({T, Nq, D}, rng_, 3.0f);
    HostTensor k = test::random_bf16({T, Nkv, D}, rng_, 3.0f);
    HostTensor v = test::random_bf16({T, Nkv, D}, rng_, 2.0f);
    HostTensor q_norm = test::random_bf16({D}, rng_, 0.3f, 1.0f);
    HostTensor k_norm = test::random_bf16({D}, rng_, 0.3f, 1.0f);
    HostTensor pos = make_positions(T, rng_);
    HostTensor cache_k = test::random_bf16({num_blocks, block_size, Nkv, D}, rng_, 5.0f);
    HostTensor cache_v = test::random_bf16({num_blocks, block_size, Nkv, D}, rng_, 5.0f);
    std::vector<int64_t> free_slots(static_cast<size_t>(num_blocks * block_size));
    for (size_t i = 0; i < free_slots.size(); ++i) free_slots[i] = static_cast<int64_t>(i);
    std::shuffle(free_slots.begin(), free_slots.end(), rng_);
    ASSERT_LE(T, num_blocks * block_size);
    HostTensor slots(DType::kI64, {T});
    for (int64_t t = 0; t < T; ++t) slots.as<int64_t>()[t] = t % 3 == 1 ? -1 : free_slots[t];
    const TensorView dq_norm = upload(q_norm), dk_norm = upload(k_norm), dpos = upload(pos),
                     dv = upload(v), dslots = upload(slots);

    const TensorView uq = upload(q), uk = upload(k);  // the unfused GPU ops
    const PagedKv ukv{upload(cache_k), upload(cache_v), block_size};
    const QkTensors uqk{uq, uk, dq_norm, dk_norm, dpos};
    if (rope) {
      qk_norm_rope(gpu, uqk, kEps, kTheta);
    } else {
      qk_norm_ssmax(gpu, uqk, kEps);
    }
    store_kv(gpu, uk, dv, dslots, ukv);

    const TensorView dq = upload(q), dk = upload(k);
    const PagedKv kv{upload(cache_k), upload(cache_v), block_size};
    const QkTensors qk{dq, dk, dq_norm, dk_norm, dpos};
    const KvStore store{dv, dslots, kv};
    if (rope) {
      qk_norm_rope(gpu, qk, kEps, kTheta, &store);
    } else {
      qk_norm_ssmax(gpu, qk, kEps, &store);
    }
    EXPECT_TRUE(test::bits_equal(download(dq).view, download(uq).view)) << "q";
    EXPECT_TRUE(test::bits_equal(download(dk).view, download(uk).view)) << "k";
    EXPECT_TRUE(test::bits_equal(download(kv.k).view, download(ukv.k).view)) << "cache k";
    EXPECT_TRUE(test::bits_equal(download(kv.v).view, download(ukv.v).view)) << "cache v";
    EXPECT_TRUE(test::bits_equal(download(dv).view, v.view)) << "v is an input";
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

// Beam heads at the decode and prefill sizes around the fused kernel's block layouts (a token's
// heads over 7 blocks below 64 tokens, one block per token from 64), positions up to 10^6.
TEST_F(CudaRope, QkNormFusedBeamHeads) {
  for (bool rope : {true, false}) {
    for (int64_t T : {1, 3, 8, 9, 33, 63, 64, 300}) check_qk(T, 48, 8, 128, rope);
  }
  check_qk(7, 48, 8, 128, true, 10000.0f);
}

// Other head sizes: D = 16 (2 packs), 64, 256 (a pack per lane), head counts that leave a block's
// warps idle; D = 8, 6 and 512 take the unfused ops.
TEST_F(CudaRope, QkNormFusedOtherHeads) {
  for (bool rope : {true, false}) {
    check_qk(5, 2, 1, 16, rope);
    check_qk(5, 4, 2, 64, rope);
    check_qk(3, 3, 1, 256, rope);
    check_qk(70, 5, 1, 64, rope);
    check_qk(4, 2, 1, 8, rope);
    check_qk(4, 3, 1, 6, rope);
    check_qk(2, 2, 1, 512, rope);
  }
}

// The fused q/k op + store_kv at Beam's heads: decode and small prefill sizes, slots -1, a full
// pool (16-slot blocks) and a smaller sliding-like pool (64-slot blocks), the one-block-per-token
// layout from 64 tokens.
TEST_F(CudaRope, QkNormStoreKvBeamHeads) {
  for (bool rope : {true, false}) {
    for (int64_t T : {1, 3, 8, 32}) {
      check_qk_store(T, 48, 8, 128, rope, 40, 16);
      check_qk_store(T, 48, 8, 128, rope, 3, 64);
    }
    check_qk_store(70, 48, 8, 128, rope, 9, 16);
  }
}

// Other head sizes: the fused kernel (D 16, 64, 256) and the unfused fallback (D 8, 6, 512).
TEST_F(CudaRope, QkNormStoreKvOtherHeads) {
  for (bool rope : {true, false}) {
    check_qk_store(5, 2, 1, 16, rope, 4, 4);
    check_qk_store(5, 4, 2, 64, rope, 2, 8);
    check_qk_store(3, 3, 1, 256, rope, 1, 4);
    check_qk_store(4, 2, 1, 8, rope, 2, 4);
    check_qk_store(4, 3, 1, 6, rope, 2, 4);
    check_qk_store(2, 2, 1, 512, rope, 1, 4);
  }
}

}  // namespace
}  // namespace beam
