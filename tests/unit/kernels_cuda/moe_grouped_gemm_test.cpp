// The grouped expert GEMMs (kernels/cuda/moe_grouped_gemm.cuh) through moe_experts' grouped path,
// forced, against the CPU op: per-expert row counts around the tile sizes (0, 1, 15-17, 255-257,
// 511-513 and beyond: tiles split an expert's rows evenly in steps of 16 up to 256), partial
// column bands and K slices, odd widths (unvectorised loads), skewed routing, and Beam's widths
// (hidden 5120, 256 experts of 2560, top-8) at T = 512 and 2048 with uniform and skewed routing
// and an expert with exactly one row; shapes for the TMA kernel (tiles > SMs, K tails, partial
// weight boxes) and batch invariance (a token's bits without the other tokens). Tolerance as in
// moe_test.cpp: within 3 bf16 ulps or 2e-2 of the output's rms, max rel err < 1e-2, >= 95% within 1
// ulp; and the same bits on every run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/api/moe.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/moe.h"
#endif

namespace beam {
namespace {

struct Shape5 {
  int64_t T, H, E, I, top_k;
};

struct Experts {
  HostTensor x, gate_up, down, ids, weights;
};

// x ~ N(0, 1); weights uniform with std 0.02 (a checkpoint's scale); routing weights in
// [0.05, 0.6]; ids left to the caller (zeros).
Experts make_weights(const Shape5& s, uint32_t seed) {
  Experts d{HostTensor(), HostTensor(DType::kBF16, {s.E, 2 * s.I, s.H}),
            HostTensor(DType::kBF16, {s.E, s.H, s.I}), HostTensor(DType::kI32, {s.T, s.top_k}),
            HostTensor(DType::kF32, {s.T, s.top_k})};
  std::mt19937 rng(seed);
  d.x = test::random_bf16({s.T, s.H}, rng, 1.0f);
  const float uniform_scale = 0.02f * std::sqrt(3.0f);
  test::fill_uniform(d.gate_up.view, seed + 1, uniform_scale);
  test::fill_uniform(d.down.view, seed + 2, uniform_scale);
  std::uniform_real_distribution<float> w(0.05f, 0.6f);
  for (int64_t i = 0; i < s.T * s.top_k; ++i) d.weights.as<float>()[i] = w(rng);
  std::fill_n(d.ids.as<int32_t>(), s.T * s.top_k, 0);
  return d;
}

// Token t's slots: `fixed` experts first (in this order), the rest distinct uniform draws from the
// experts not fixed.
void route_uniform(const Shape5& s, const std::vector<int32_t>& fixed, uint32_t seed,
                   HostTensor& ids) {
  std::mt19937 rng(seed);
  std::vector<int32_t> pool;
  for (int32_t e = 0; e < s.E; ++e)
    if (std::find(fixed.begin(), fixed.end(), e) == fixed.end()) pool.push_back(e);
  for (int64_t t = 0; t < s.T; ++t) {
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int64_t k = 0; k < s.top_k; ++k)
      ids.as<int32_t>()[t * s.top_k + k] =
          k < static_cast<int64_t>(fixed.size()) ? fixed[k] : pool[k - fixed.size()];
  }
}

// top_k = 1: expert e gets exactly counts[e] tokens, the tokens in shuffled order (so an expert's
// grouped rows gather scattered x rows).
void route_counts(const std::vector<int64_t>& counts, uint32_t seed, HostTensor& ids) {
  std::vector<int32_t> slots;
  for (size_t e = 0; e < counts.size(); ++e) slots.insert(slots.end(), counts[e], int32_t(e));
  std::mt19937 rng(seed);
  std::shuffle(slots.begin(), slots.end(), rng);
  BEAM_CHECK(static_cast<int64_t>(slots.size()) == ids.view.numel());
  std::copy(slots.begin(), slots.end(), ids.as<int32_t>());
}

// Makes expert `e` appear in token 0's first slot and nowhere else (other tokens' slots on e are
// moved to the lowest expert that token does not use).
void single_row_expert(const Shape5& s, int32_t e, HostTensor& ids) {
  int32_t* id = ids.as<int32_t>();
  for (int64_t t = 0; t < s.T; ++t) {
    int32_t* row = id + t * s.top_k;
    for (int64_t k = 0; k < s.top_k; ++k) {
      const bool want = t == 0 && k == 0;
      if (want && row[k] != e) {
        for (int64_t j = 1; j < s.top_k; ++j)
          if (row[j] == e) row[j] = row[0];  // keep the token's experts distinct
        row[k] = e;
      } else if (!want && row[k] == e) {
        int32_t free = 0;
        while (free == e || std::find(row, row + s.top_k, free) != row + s.top_k) ++free;
        row[k] = free;
      }
    }
  }
}

class CudaMoeGroupedGemm : public test::CudaTest {
 protected:
  // The grouped path (forced) on device tensors.
  void run_grouped(const TensorView& x, const TensorView& gate_up, const TensorView& down,
                   const TensorView& ids, const TensorView& weights, const TensorView& out) {
#if BEAMSERVE_CUDA
    cuda::moe_experts(*gpu.cuda, x, gate_up, down, ids, weights, out,
                      cuda::MoeExpertsPath::kGrouped);
#else  // the fixture skips without the backend
    ADD_FAILURE() << "no CUDA backend";
#endif
  }

  // GPU grouped experts on device weights vs the CPU op on the host ones; twice, same bits.
  void check(const char* what, const Shape5& s, const Experts& d, const TensorView& gate_up,
             const TensorView& down, const KernelContext& cpu_ctx) {
    SCOPED_TRACE(::testing::Message() << what << " T=" << s.T << " H=" << s.H << " E=" << s.E
                                      << " I=" << s.I << " top_k=" << s.top_k);
    HostTensor want(DType::kBF16, {s.T, s.H});
    moe_experts(cpu_ctx, d.x.view, d.gate_up.view, d.down.view, d.ids.view, d.weights.view,
                want.view);
    const TensorView x = upload(d.x), ids = upload(d.ids), weights = upload(d.weights);
    const TensorView out = device_tensor(DType::kBF16, {s.T, s.H});
    run_grouped(x, gate_up, down, ids, weights, out);
    const HostTensor got = download(out);
    run_grouped(x, gate_up, down, ids, weights, out);
    EXPECT_TRUE(test::bits_equal(download(out).view, got.view)) << "second run differs";
    expect_close(what, s, got.view, want.view);
  }
  void check(const char* what, const Shape5& s, const Experts& d) {
    check(what, s, d, upload_experts(d.gate_up, ExpertMatrix::kGateUp),
          upload_experts(d.down, ExpertMatrix::kDown), cpu.two);
  }

  // moe_test.cpp's criteria: no element more than 3 bf16 ulps and 2e-2 * rms(want) apart (or
  // NaN), max |got - want| / max |want| < 1e-2, >= 95% within 1 ulp.
  static void expect_close(const char* what, const Shape5& s, const TensorView& got,
                           const TensorView& want) {
    const int64_t n = want.numel();
    double sumsq = 0, max_ref = 1e-30;
    for (int64_t i = 0; i < n; ++i) {
      const double w = test::value_at(want, i);
      sumsq += w * w;
      max_ref = std::max(max_ref, std::fabs(w));
    }
    const double tol = 2e-2 * std::sqrt(sumsq / double(std::max<int64_t>(n, 1)));
    double max_err = 0;
    int64_t bad = 0, close = 0, equal = 0, worst = -1;
    for (int64_t i = 0; i < n; ++i) {
      const float g = test::value_at(got, i), w = test::value_at(want, i);
      const double err = std::isnan(g) ? INFINITY : std::fabs(double(g) - w);
      if (err > max_err) {
        max_err = err;
        worst = i;
      }
      const int ulps = test::bf16_ulps(g, w);
      equal += got.as<bf16>()[i].bits == want.as<bf16>()[i].bits;
      close += ulps <= 1;
      const bool far = std::isnan(g) || (ulps > 3 && err > tol);
      if (far && bad < 6)  // the first few, to see a layout pattern in a failure
        std::printf("  token %lld col %lld: got %g want %g\n",
                    static_cast<long long>(i / std::max<int64_t>(s.H, 1)),
                    static_cast<long long>(i % std::max<int64_t>(s.H, 1)), g, w);
      bad += far;
    }
    const double frac = double(close) / double(std::max<int64_t>(n, 1));
    std::printf(
        "moe grouped %s T=%lld H=%lld E=%lld I=%lld k=%lld: max rel err %.3g, bit-equal "
        "%.4f, within 1 bf16 ulp %.4f\n",
        what, static_cast<long long>(s.T), static_cast<long long>(s.H), static_cast<long long>(s.E),
        static_cast<long long>(s.I), static_cast<long long>(s.top_k), max_err / max_ref,
        double(equal) / double(std::max<int64_t>(n, 1)), frac);
    EXPECT_EQ(bad, 0) << "worst element " << worst << " (token "
                      << worst / std::max<int64_t>(s.H, 1)
                      << "): " << (worst >= 0 ? test::value_at(got, worst) : 0.0f) << " vs "
                      << (worst >= 0 ? test::value_at(want, worst) : 0.0f);
    EXPECT_LT(max_err / max_ref, 1e-2);
    EXPECT_GE(frac, 0.95);
  }
};

TEST_F(CudaMoeGroupedGemm, TinyShapesMatchCpu) {
  for (const Shape5& s : {Shape5{7, 64, 8, 32, 2},      // one short tile per expert
                          Shape5{1, 64, 8, 32, 2},      // T = 1
                          Shape5{5, 40, 6, 24, 3},      // K not a multiple of 64, n of the band
                          Shape5{4, 37, 5, 19, 2},      // odd widths: element-wise loads
                          Shape5{9, 200, 4, 72, 2},     // 200: a K tail of 8, a partial band
                          Shape5{130, 96, 4, 48, 2},    // ~65 rows per expert
                          Shape5{3, 64, 64, 32, 4}}) {  // most experts empty
    Experts d = make_weights(s, static_cast<uint32_t>(s.T * 131 + s.H));
    route_uniform(s, {}, static_cast<uint32_t>(s.T + s.E), d.ids);
    check("uniform", s, d);
  }
}

// Expert row counts on both sides of the 16-row step and the 256-row tile: one tile of 1, 15, 16,
// 17, 255 or 256 rows, two tiles for 257 (144 + 113) and 512 (256 + 256), three for 513 (176 +
// 176 + 161), four for 1000 (3 x 256 + 232); plus empty experts. Widths with partial column bands
// and K slices, and odd ones.
TEST_F(CudaMoeGroupedGemm, RowCountsAroundTileSizesMatchCpu) {
  const std::vector<int64_t> counts = {0, 1, 15, 16, 17, 255, 256, 257, 512, 513, 1000, 0, 3};
  const int64_t T = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  for (const auto& [H, I] : {std::pair<int64_t, int64_t>{128, 96}, {200, 136}, {37, 19}}) {
    const Shape5 s{T, H, static_cast<int64_t>(counts.size()), I, 1};
    Experts d = make_weights(s, static_cast<uint32_t>(H * 7 + I));
    route_counts(counts, static_cast<uint32_t>(H + I), d.ids);
    check("row counts", s, d);
  }
}

// All slots on one expert (top-1: 700 rows, three tiles), and every token on experts 6 and 3 with
// token 0 on 2 and 6.
TEST_F(CudaMoeGroupedGemm, SkewedRoutingMatchesCpu) {
  Shape5 s{700, 128, 8, 64, 1};
  Experts d = make_weights(s, 801);
  std::fill_n(d.ids.as<int32_t>(), s.T * s.top_k, 5);
  check("one expert", s, d);
  s = {300, 192, 8, 128, 2};
  d = make_weights(s, 802);
  for (int64_t t = 0; t < s.T; ++t) {
    d.ids.as<int32_t>()[2 * t] = 6;
    d.ids.as<int32_t>()[2 * t + 1] = 3;
  }
  d.ids.as<int32_t>()[1] = 2;
  check("two experts", s, d);
}

// Shapes for the warp-specialized TMA kernel (k % 8 == 0; n % 8 for gate_up, % 16 for down): more
// jobs than clusters (each producer takes many, the 4-stage ring wraps many times, rank 0 posts
// past its 8 mailboxes), K tails of 8, 16 and 24 inside a 64-wide slice (zero-filled by the tensor
// map), column bands ending inside a weight box (200 act columns: the fourth band holds one group
// of 8), odd band counts (a cluster's second band past n: its block computes zeros and stores
// nothing), experts past 256 rows (several M tiles) and empty ones; and a down GEMM that falls
// back (n = 200) after a TMA gate_up.
TEST_F(CudaMoeGroupedGemm, TmaShapesMatchCpu) {
  for (const Shape5& s : {Shape5{1500, 256, 64, 200, 4},  // ~94 rows per expert, ~190 tiles
                          Shape5{600, 144, 16, 88, 2},    // K tails 16 (gate_up) and 24 (down)
                          Shape5{900, 144, 3, 24, 1},     // ~300 rows per expert: 2 M tiles
                          Shape5{700, 192, 8, 192, 2},    // 3 gate_up bands: the 2nd pair's 2nd
                                                          // band past n
                          Shape5{1000, 256, 64, 200, 4},  // ~62 rows per expert: two-band tiles,
                                                          // a job's last bands past n
                          Shape5{40, 200, 80, 72, 6},     // most experts on 1-5 rows, some empty
                          Shape5{64, 8, 4, 8, 2}}) {      // k = 8: one slice, mostly zeros
    Experts d = make_weights(s, static_cast<uint32_t>(s.T * 17 + s.I));
    route_uniform(s, {}, static_cast<uint32_t>(s.T + 3 * s.E), d.ids);
    check("tma", s, d);
  }
}

// A token's output does not depend on the other tokens of the batch (which rows share its tiles,
// which block takes a tile): the first 200 tokens alone give the same bits as inside 700 tokens.
TEST_F(CudaMoeGroupedGemm, BatchInvariant) {
  const Shape5 s{700, 256, 16, 128, 4};
  Experts d = make_weights(s, 1201);
  route_uniform(s, {}, 1202, d.ids);
  const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                   down = upload_experts(d.down, ExpertMatrix::kDown);
  const TensorView out = device_tensor(DType::kBF16, {s.T, s.H});
  run_grouped(upload(d.x), gate_up, down, upload(d.ids), upload(d.weights), out);
  const HostTensor all = download(out);
  const int64_t part = 200;
  HostTensor x(DType::kBF16, {part, s.H}), ids(DType::kI32, {part, s.top_k}),
      w(DType::kF32, {part, s.top_k});
  std::copy_n(d.x.as<bf16>(), part * s.H, x.as<bf16>());
  std::copy_n(d.ids.as<int32_t>(), part * s.top_k, ids.as<int32_t>());
  std::copy_n(d.weights.as<float>(), part * s.top_k, w.as<float>());
  const TensorView out_part = device_tensor(DType::kBF16, {part, s.H});
  run_grouped(upload(x), gate_up, down, upload(ids), upload(w), out_part);
  const HostTensor got = download(out_part);
  int64_t differ = 0;
  for (int64_t i = 0; i < part * s.H; ++i)
    differ += got.as<bf16>()[i].bits != all.as<bf16>()[i].bits;
  EXPECT_EQ(differ, 0) << "of " << part * s.H << " outputs";
}

// Beam's widths at prefill sizes: T = 512 (~16 rows per expert, expert 255 on exactly one row)
// and T = 2048 (~64 rows per expert), uniform; T = 2048 with experts 0-3 on every token (2048 rows
// each: 8 tiles) and the other slots uniform.
TEST_F(CudaMoeGroupedGemm, BeamShapesMatchCpu) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  const Shape5 full{2048, 5120, 256, 2560, 8};
  Experts d = make_weights(full, 901);  // 20 GB of weights, uploaded once
  const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                   down = upload_experts(d.down, ExpertMatrix::kDown);
  ThreadPool pool(0);
  const KernelContext cpu_all{Device::kCpu, &pool};
  auto part = [&](int64_t T) {  // the first T tokens of d, sharing the weights
    Experts p{HostTensor(DType::kBF16, {T, full.H}), HostTensor(), HostTensor(),
              HostTensor(DType::kI32, {T, full.top_k}), HostTensor(DType::kF32, {T, full.top_k})};
    std::copy_n(d.x.as<bf16>(), T * full.H, p.x.as<bf16>());
    std::copy_n(d.weights.as<float>(), T * full.top_k, p.weights.as<float>());
    p.gate_up.view = d.gate_up.view;
    p.down.view = d.down.view;
    return p;
  };
  {
    Shape5 s = full;
    s.T = 512;
    Experts p = part(s.T);
    route_uniform(s, {}, 902, p.ids);
    single_row_expert(s, 255, p.ids);
    check("uniform, expert 255 on one row", s, p, gate_up, down, cpu_all);
  }
  {
    Experts p = part(full.T);
    route_uniform(full, {}, 903, p.ids);
    check("uniform", full, p, gate_up, down, cpu_all);
    route_uniform(full, {0, 1, 2, 3}, 904, p.ids);
    check("skewed: experts 0-3 on every token", full, p, gate_up, down, cpu_all);
  }
}

}  // namespace
}  // namespace beam
