// RoPE and SSMax against values dumped from PyTorch (tests/data/kernels): inv_freq, angles and the
// SSMax factor bit-exact, cos/sin within 1 fp32 ulp, and the bf16 rounding points of the rotation.
#include "kernels/api/rope.h"

#include <bit>
#include <cstdio>
#include <limits>

#include "kernel_test_util.h"
#include "kernels/api/attention.h"
#include "kernels/api/norm.h"
#include "kernels/cpu/torch_math.h"

namespace beam {
namespace {

using test::Contexts;

int32_t f32_ulps(float a, float b) {
  auto key = [](float f) {
    int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? std::numeric_limits<int32_t>::min() - i : i;
  };
  return std::abs(key(a) - key(b));
}

TEST(Rope, InvFreqIsBitIdenticalToTorch) {
  NpyArray t = test::load_table("rope_inv_freq.npy", "<f4");
  ASSERT_EQ(t.shape.size(), 2u);
  int differs_from_glibc = 0;
  for (int64_t r = 0; r < t.shape[0]; ++r) {
    const float* row = t.as<float>() + r * 4;
    const float theta = row[0];
    const int64_t D = static_cast<int64_t>(row[1]), i = static_cast<int64_t>(row[2]);
    ASSERT_EQ(std::bit_cast<uint32_t>(rope_inv_freq(theta, i, D)), std::bit_cast<uint32_t>(row[3]))
        << "theta " << theta << " D " << D << " i " << i;
    const float glibc = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(D));
    differs_from_glibc += glibc != row[3];
  }
  // The reason torch_math.h exists: a correctly rounded powf disagrees with torch somewhere.
  EXPECT_GT(differs_from_glibc, 0);
}

void check_cos_sin(const char* tag, float theta) {
  SCOPED_TRACE(tag);
  NpyArray pos = test::load_table("rope_positions.npy", "<i8");
  NpyArray angles = test::load_table(std::string("rope_angles_") + tag + ".npy", "<f4");
  NpyArray cos_t = test::load_table(std::string("rope_cos_") + tag + ".npy", "<f4");
  NpyArray sin_t = test::load_table(std::string("rope_sin_") + tag + ".npy", "<f4");
  const int64_t P = pos.numel(), half = 64;
  std::vector<float> cos_d(2 * half), sin_d(2 * half);
  int differs_from_glibc = 0;
  for (int64_t p = 0; p < P; ++p) {
    const int64_t position = pos.as<int64_t>()[p];
    for (int64_t i = 0; i < half; ++i) {
      const float angle = rope_angle(position, rope_inv_freq(theta, i, 2 * half));
      ASSERT_EQ(std::bit_cast<uint32_t>(angle),
                std::bit_cast<uint32_t>(angles.as<float>()[p * half + i]))
          << "position " << position << " i " << i;
    }
    rope_cos_sin(position, theta, 2 * half, cos_d, sin_d);
    for (int64_t d = 0; d < 2 * half; ++d) {
      const float c = cos_t.as<float>()[p * 2 * half + d], s = sin_t.as<float>()[p * 2 * half + d];
      ASSERT_EQ(std::bit_cast<uint32_t>(cos_d[d]), std::bit_cast<uint32_t>(c))
          << "cos, position " << position << " d " << d;
      ASSERT_EQ(std::bit_cast<uint32_t>(sin_d[d]), std::bit_cast<uint32_t>(s))
          << "sin, position " << position << " d " << d;
      const float angle = angles.as<float>()[p * half + d % half];
      ASSERT_LE(f32_ulps(std::cos(angle), c), 1) << "glibc cos at " << angle;
      ASSERT_LE(f32_ulps(std::sin(angle), s), 1) << "glibc sin at " << angle;
      differs_from_glibc += std::cos(angle) != c || std::sin(angle) != s;
    }
  }
  std::printf("%s: %d of %lld cos/sin values differ from glibc by 1 ulp\n", tag, differs_from_glibc,
              static_cast<long long>(P * 2 * half));
}

TEST(Rope, AnglesAndCosSinMatchTorch) {
  check_cos_sin("theta1e4", 10000.0f);
  check_cos_sin("theta1e6", 1000000.0f);
}

TEST(Rope, SsmaxScaleIsBitIdenticalToTorch) {
  NpyArray pos = test::load_table("ssmax_positions.npy", "<i8");
  NpyArray scale = test::load_table("ssmax_scale.npy", "<f4");
  for (int64_t i = 0; i < pos.numel(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(ssmax_scale(pos.as<int64_t>()[i])),
              std::bit_cast<uint32_t>(scale.as<float>()[i]))
        << "position " << pos.as<int64_t>()[i];
  }
  for (int64_t p : {0, 2047, 1000000, 1048575})
    EXPECT_NEAR(ssmax_scale(p), std::pow(1.0 + (p + 1) / 2048.0, 0.1), 2e-7) << p;
  EXPECT_NEAR(ssmax_scale(0), 1.0000488f, 2e-7f);  // BEAM.md §3.5 examples
  EXPECT_NEAR(ssmax_scale(2047), 1.0718f, 1e-4f);
}

// BEAM.md §3.4 written out for one head row: cos/sin rounded to bf16, each product rounded, the
// sum rounded; rotate_half([x1, x2]) = [-x2, x1].
void reference_rope_row(const bf16* in, bf16* out, int64_t D, int64_t p, float theta) {
  const int64_t half = D / 2;
  std::vector<float> cos_d(D), sin_d(D);
  rope_cos_sin(p, theta, D, cos_d, sin_d);
  for (int64_t d = 0; d < D; ++d) {
    const float c = round_bf16(cos_d[d]), s = round_bf16(sin_d[d]);
    const float rot = d < half ? -to_float(in[d + half]) : to_float(in[d - half]);
    out[d] = to_bf16(round_bf16(to_float(in[d]) * c) + round_bf16(rot * s));
  }
}

void check_rope(int64_t T, int64_t Nq, int64_t Nkv, int64_t D, int64_t pos0, float theta) {
  SCOPED_TRACE(::testing::Message()
               << "T=" << T << " Nq=" << Nq << " Nkv=" << Nkv << " D=" << D << " pos0=" << pos0);
  Contexts ctx;
  std::mt19937 rng(7);
  HostTensor q = test::random_bf16({T, Nq, D}, rng), k = test::random_bf16({T, Nkv, D}, rng);
  HostTensor positions(DType::kI64, {T});
  for (int64_t t = 0; t < T; ++t) positions.as<int64_t>()[t] = pos0 + 3 * t;  // not contiguous
  HostTensor q1 = test::copy_of(q), k1 = test::copy_of(k), q2 = test::copy_of(q),
             k2 = test::copy_of(k);
  apply_rope(ctx.one, q1.view, k1.view, positions.view, theta);
  apply_rope(ctx.two, q2.view, k2.view, positions.view, theta);
  ASSERT_TRUE(test::bits_equal(q1.view, q2.view) && test::bits_equal(k1.view, k2.view));

  std::vector<bf16> want(static_cast<size_t>(D));
  std::vector<float> cos_d(D), sin_d(D);
  int single_rounding_differs = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t p = positions.as<int64_t>()[t];
    rope_cos_sin(p, theta, D, cos_d, sin_d);
    for (auto [in, got, heads] : {std::tuple{&q, &q2, Nq}, std::tuple{&k, &k2, Nkv}}) {
      for (int64_t h = 0; h < heads; ++h) {
        const bf16* src = in->as<bf16>() + (t * heads + h) * D;
        reference_rope_row(src, want.data(), D, p, theta);
        const bf16* out = got->as<bf16>() + (t * heads + h) * D;
        for (int64_t d = 0; d < D; ++d) {
          ASSERT_EQ(out[d].bits, want[d].bits) << "t " << t << " head " << h << " d " << d;
          const float c = round_bf16(cos_d[d]), s = round_bf16(sin_d[d]);
          const float rot = d < D / 2 ? -to_float(src[d + D / 2]) : to_float(src[d - D / 2]);
          single_rounding_differs += to_bf16(to_float(src[d]) * c + rot * s).bits != want[d].bits;
        }
      }
    }
  }
  // The products are rounded before the sum, and that changes some results.
  EXPECT_GT(single_rounding_differs, 0);
}

TEST(Rope, AppliesHfRotateHalfWithBf16Rounding) {
  check_rope(5, 4, 2, 128, 0, 10000.0f);  // tiny-beam geometry
  check_rope(9, 4, 2, 64, 17, 500000.0f);
  check_rope(3, 4, 2, 128, 1000000, 10000.0f);    // positions around 10^6
  check_rope(2, 48, 8, 128, 999999, 1000000.0f);  // Beam geometry
}

TEST(Rope, RotatesUnitVectorByTheAngle) {
  // x = e_i: out[i] = bf16(cos(angle_i)), out[i + D/2] = bf16(sin(angle_i)), zero elsewhere.
  Contexts ctx;
  const int64_t D = 128, i = 5, p = 1000000;
  HostTensor q(DType::kBF16, {1, 1, D}), k(DType::kBF16, {1, 1, D}), pos(DType::kI64, {1});
  std::fill_n(q.as<bf16>(), D, to_bf16(0.0f));
  std::fill_n(k.as<bf16>(), D, to_bf16(0.0f));
  q.as<bf16>()[i] = to_bf16(1.0f);
  pos.as<int64_t>()[0] = p;
  apply_rope(ctx.two, q.view, k.view, pos.view, 10000.0f);
  std::vector<float> cos_d(D), sin_d(D);
  rope_cos_sin(p, 10000.0f, D, cos_d, sin_d);
  const float angle = rope_angle(p, rope_inv_freq(10000.0f, i, D));
  EXPECT_NEAR(cos_d[i], std::cos(double(angle)), 1e-6);
  EXPECT_NEAR(sin_d[i + D / 2], std::sin(double(angle)), 1e-6);
  for (int64_t d = 0; d < D; ++d) {
    float want = d == i           ? round_bf16(cos_d[i])
                 : d == i + D / 2 ? round_bf16(sin_d[i + D / 2])
                                  : 0.0f;
    EXPECT_EQ(to_float(q.as<bf16>()[d]), want) << d;
  }
}

TEST(Ssmax, ScalesQueriesOnceInFp32) {
  Contexts ctx;
  std::mt19937 rng(8);
  const int64_t T = 6, Nq = 4, D = 128;
  HostTensor q = test::random_bf16({T, Nq, D}, rng), pos(DType::kI64, {T});
  const int64_t ps[T] = {0, 1, 2047, 2048, 1000000, 1048575};
  for (int64_t t = 0; t < T; ++t) pos.as<int64_t>()[t] = ps[t];
  HostTensor q1 = test::copy_of(q), q2 = test::copy_of(q);
  apply_ssmax(ctx.one, q1.view, pos.view);
  apply_ssmax(ctx.two, q2.view, pos.view);
  ASSERT_TRUE(test::bits_equal(q1.view, q2.view));
  for (int64_t t = 0; t < T; ++t) {
    const float s = ssmax_scale(ps[t]);
    for (int64_t j = 0; j < Nq * D; ++j) {
      const int64_t idx = t * Nq * D + j;
      ASSERT_EQ(q2.as<bf16>()[idx].bits, to_bf16(to_float(q.as<bf16>()[idx]) * s).bits);
    }
  }
}

TEST(TorchMath, ActivationsMatchTorch) {
  NpyArray x = test::load_table("act_input.npy", "<f4");
  NpyArray sig = test::load_table("act_sigmoid.npy", "<f4");
  NpyArray silu = test::load_table("act_silu.npy", "<f4");
  NpyArray cap = test::load_table("act_softcap30.npy", "<f4");
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.as<float>()[i];
    ASSERT_EQ(cpu::torch_sigmoidf(v), sig.as<float>()[i]) << v;
    ASSERT_EQ(cpu::torch_siluf(v), silu.as<float>()[i]) << v;
    ASSERT_EQ(30.0f * cpu::torch_tanhf(v / 30.0f), cap.as<float>()[i]) << v;
  }
}

// qk_norm_rope / qk_norm_ssmax = the per-head rms_norms then apply_rope / apply_ssmax, bit for bit,
// at tiny-beam and Beam head geometry with positions near 10^6.
TEST(QkNormPosition, EqualsNormsThenRopeOrSsmax) {
  Contexts ctx;
  std::mt19937 rng(14);
  const float eps = 1e-6f;
  struct Geometry {
    int64_t T, Nq, Nkv, D;
  };
  for (const Geometry& g : {Geometry{5, 4, 2, 128}, Geometry{3, 3, 1, 6}, Geometry{2, 48, 8, 128}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << g.T << " Nq=" << g.Nq << " D=" << g.D);
    HostTensor q = test::random_bf16({g.T, g.Nq, g.D}, rng, 2.0f),
               k = test::random_bf16({g.T, g.Nkv, g.D}, rng, 2.0f),
               q_norm = test::random_bf16({g.D}, rng, 0.3f, 1.0f),
               k_norm = test::random_bf16({g.D}, rng, 0.3f, 1.0f), pos(DType::kI64, {g.T});
    for (int64_t t = 0; t < g.T; ++t) pos.as<int64_t>()[t] = 1000000 - 2 * t;
    for (bool rope : {true, false}) {
      HostTensor want_q = test::copy_of(q), want_k = test::copy_of(k);
      const TensorView wq2 = want_q.view.reshape({g.T * g.Nq, g.D}),
                       wk2 = want_k.view.reshape({g.T * g.Nkv, g.D});
      rms_norm(ctx.one, wq2, q_norm.view, eps, wq2);
      rms_norm(ctx.one, wk2, k_norm.view, eps, wk2);
      HostTensor got_q = test::copy_of(q), got_k = test::copy_of(k);
      const QkTensors qk{got_q.view, got_k.view, q_norm.view, k_norm.view, pos.view};
      if (rope) {
        apply_rope(ctx.one, want_q.view, want_k.view, pos.view, 10000.0f);
        qk_norm_rope(ctx.two, qk, eps, 10000.0f);
      } else {
        apply_ssmax(ctx.one, want_q.view, pos.view);
        qk_norm_ssmax(ctx.two, qk, eps);
      }
      EXPECT_TRUE(test::bits_equal(got_q.view, want_q.view)) << (rope ? "rope" : "ssmax");
      EXPECT_TRUE(test::bits_equal(got_k.view, want_k.view)) << (rope ? "rope" : "ssmax");
    }
  }
}

// qk_norm_rope / qk_norm_ssmax with a store = the same ops without it, then store_kv of
// the final k and v, bit for bit (q, k and the pool), slot -1 rows skipped; bad slots abort.
TEST(QkNormPosition, StoreKvFormsEqualTheOpsThenStoreKv) {
  Contexts ctx;
  std::mt19937 rng(15);
  const float eps = 1e-6f;
  struct Geometry {
    int64_t T, Nq, Nkv, D, blocks, block_size;
  };
  for (const Geometry& g : {Geometry{5, 4, 2, 16, 3, 4}, Geometry{3, 3, 1, 6, 2, 2},
                            Geometry{3, 48, 8, 128, 2, 16}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << g.T << " Nq=" << g.Nq << " D=" << g.D);
    HostTensor q = test::random_bf16({g.T, g.Nq, g.D}, rng, 2.0f),
               k = test::random_bf16({g.T, g.Nkv, g.D}, rng, 2.0f),
               v = test::random_bf16({g.T, g.Nkv, g.D}, rng, 2.0f),
               q_norm = test::random_bf16({g.D}, rng, 0.3f, 1.0f),
               k_norm = test::random_bf16({g.D}, rng, 0.3f, 1.0f), pos(DType::kI64, {g.T}),
               slots(DType::kI64, {g.T});
    const HostTensor cache_k = test::random_bf16({g.blocks, g.block_size, g.Nkv, g.D}, rng),
                     cache_v = test::random_bf16({g.blocks, g.block_size, g.Nkv, g.D}, rng);
    for (int64_t t = 0; t < g.T; ++t) {
      pos.as<int64_t>()[t] = 1000000 - 2 * t;
      slots.as<int64_t>()[t] = t == 1 ? -1 : g.blocks * g.block_size - 1 - 2 * t;
    }
    for (bool rope : {true, false}) {
      HostTensor want_q = test::copy_of(q), want_k = test::copy_of(k);
      HostTensor want_ck = test::copy_of(cache_k), want_cv = test::copy_of(cache_v);
      const QkTensors want{want_q.view, want_k.view, q_norm.view, k_norm.view, pos.view};
      HostTensor got_q = test::copy_of(q), got_k = test::copy_of(k);
      HostTensor got_ck = test::copy_of(cache_k), got_cv = test::copy_of(cache_v);
      const QkTensors got{got_q.view, got_k.view, q_norm.view, k_norm.view, pos.view};
      const KvStore store{v.view, slots.view, {got_ck.view, got_cv.view, g.block_size}};
      if (rope) {
        qk_norm_rope(ctx.one, want, eps, 10000.0f);
        qk_norm_rope(ctx.two, got, eps, 10000.0f, &store);
      } else {
        qk_norm_ssmax(ctx.one, want, eps);
        qk_norm_ssmax(ctx.two, got, eps, &store);
      }
      store_kv(ctx.one, want_k.view, v.view, slots.view,
               {want_ck.view, want_cv.view, g.block_size});
      EXPECT_TRUE(test::bits_equal(got_q.view, want_q.view)) << (rope ? "rope" : "ssmax");
      EXPECT_TRUE(test::bits_equal(got_k.view, want_k.view)) << (rope ? "rope" : "ssmax");
      EXPECT_TRUE(test::bits_equal(got_ck.view, want_ck.view)) << (rope ? "rope" : "ssmax");
      EXPECT_TRUE(test::bits_equal(got_cv.view, want_cv.view)) << (rope ? "rope" : "ssmax");
      EXPECT_FALSE(test::bits_equal(got_ck.view, cache_k.view)) << "the pool was written";
    }
  }
}

TEST(QkNormPosition, StoreKvFormsRejectMismatchedPools) {
  Contexts ctx;
  std::mt19937 rng(16);
  HostTensor q = test::random_bf16({2, 4, 16}, rng), k = test::random_bf16({2, 2, 16}, rng),
             v = test::random_bf16({2, 2, 16}, rng), w = test::random_bf16({16}, rng),
             pos(DType::kI64, {2}), slots(DType::kI64, {2});
  HostTensor ck = test::random_bf16({2, 4, 1, 16}, rng), cv = test::random_bf16({2, 4, 1, 16}, rng);
  for (int64_t t = 0; t < 2; ++t) pos.as<int64_t>()[t] = slots.as<int64_t>()[t] = t;
  const QkTensors qk{q.view, k.view, w.view, w.view, pos.view};
  const KvStore store{v.view, slots.view, {ck.view, cv.view, 4}};  // 1 KV head, k has 2
  EXPECT_DEATH(qk_norm_ssmax(ctx.one, qk, 1e-6f, &store), "cache k");
}

}  // namespace
}  // namespace beam
