// CUDA moe_experts against the CPU reference op, on both paths (grouped tensor-core GEMMs, on the
// TMA kernel with tiles of up to 64 or 256 rows (same bits) and on the cp.async one; the
// small-batch weight-streaming kernels), weights uploaded
// and packed (pack_expert_weights; the packed layout itself is checked element by element).
// Outputs differ from the CPU only through the fp32 accumulation order: asserted within 3 bf16
// ulps or 2e-2 of the output's rms, >= 95% within one ulp, with the bit-equal and 1-ulp fractions
// printed; every path must repeat its own bits. Tiny shapes, widths that are not multiples of 64
// (row-major weights: grouped only), empty experts, experts with more rows than one pass, skewed
// routing (all tokens on one expert, 256 distinct experts), Beam's widths at batch 1..256, kAuto's
// choice, the small-batch path (programmatic dependent launches) inside a CUDA graph, and its
// 16-row passes (from 257 routed rows: experts of 1..8, 9..16, 17+ rows; a token's bits do not
// depend on the pass width, on the other tokens or on how the units are dealt to blocks), and
// kNoExpert slots (a padded decode graph's padding tokens) taking no rows; per-request expert
// LoRA on every path.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "../kernels/expert_lora_factors.h"
#include "cuda_test_util.h"
#include "kernels/api/moe.h"
#include "kernels/api/shard_ops.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/moe.h"
#endif

namespace beam {
namespace {

#if BEAMSERVE_CUDA
using Path = cuda::MoeExpertsPath;
constexpr int64_t kSmallBatchMaxRows = cuda::kMoeSmallBatchMaxRows;
constexpr int64_t kSmallBatchRowLimit = cuda::kMoeSmallBatchRowLimit;
constexpr int64_t kSmallBatchMaxWidth = cuda::kMoeSmallBatchMaxWidth;
#else  // the fixture skips without the backend; these keep the tests compiling
enum class Path {
  kAuto,
  kGrouped,
  kSmallBatch,
  kGroupedCpAsync,
  kGroupedShortTiles,
  kGroupedLongTiles,
  kGroupedWideTiles
};
constexpr int64_t kSmallBatchMaxRows = 2048;
constexpr int64_t kSmallBatchRowLimit = 2048;
constexpr int64_t kSmallBatchMaxWidth = 5120;
#endif

const char* path_name(Path p) {
  switch (p) {
    case Path::kAuto:
      return "auto";
    case Path::kGrouped:
      return "grouped";
    case Path::kSmallBatch:
      return "small-batch";
    case Path::kGroupedCpAsync:
      return "grouped-cp.async";
    case Path::kGroupedShortTiles:
      return "grouped-short-tiles";
    case Path::kGroupedLongTiles:
      return "grouped-long-tiles";
    case Path::kGroupedWideTiles:
      return "grouped-wide-tiles";
  }
  return "?";
}

struct ExpertCase {
  int64_t T, H, E, I, top_k;
};

struct ExpertData {
  HostTensor x, gate_up, down, ids, weights;
};

// Distinct random experts per token with routing weights in [0.05, 0.6].
void random_routing(const ExpertCase& c, std::mt19937& rng, ExpertData& d) {
  std::vector<int32_t> experts(static_cast<size_t>(c.E));
  for (int64_t t = 0; t < c.T; ++t) {
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int64_t k = 0; k < c.top_k; ++k) {
      d.ids.as<int32_t>()[t * c.top_k + k] = experts[k];
      d.weights.as<float>()[t * c.top_k + k] =
          std::uniform_real_distribution<float>(0.05f, 0.6f)(rng);
    }
  }
}

// x ~ N(0, 1); weights uniform with std 0.02 (a checkpoint's scale); random routing.
ExpertData make_experts(const ExpertCase& c, uint32_t seed) {
  ExpertData d{HostTensor(), HostTensor(DType::kBF16, {c.E, 2 * c.I, c.H}),
               HostTensor(DType::kBF16, {c.E, c.H, c.I}), HostTensor(DType::kI32, {c.T, c.top_k}),
               HostTensor(DType::kF32, {c.T, c.top_k})};
  std::mt19937 rng(seed);
  d.x = test::random_bf16({c.T, c.H}, rng, 1.0f);
  const float uniform_scale = 0.02f * std::sqrt(3.0f);
  test::fill_uniform(d.gate_up.view, seed + 1, uniform_scale);
  test::fill_uniform(d.down.view, seed + 2, uniform_scale);
  random_routing(c, rng, d);
  return d;
}

struct ExpertStats {
  double rel = 0;          // max |got - want| / max |want|
  double bit_equal = 0;    // fraction
  double within_1ulp = 0;  // fraction
  int64_t bad = 0;         // more than 3 bf16 ulps and more than 2e-2 * rms(want) apart, or NaN
  int64_t worst = -1;
};

ExpertStats expert_stats(const TensorView& got, const TensorView& want) {
  const int64_t n = want.numel();
  double sumsq = 0, max_ref = 1e-30, max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = test::value_at(want, i);
    sumsq += w * w;
    max_ref = std::max(max_ref, std::fabs(w));
  }
  const double tol = 2e-2 * std::sqrt(sumsq / std::max<int64_t>(n, 1));
  ExpertStats s;
  int64_t equal = 0, close = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float g = test::value_at(got, i), w = test::value_at(want, i);
    const double err = std::isnan(g) ? INFINITY : std::fabs(double(g) - w);
    if (err > max_err) {
      max_err = err;
      s.worst = i;
    }
    const int ulps = test::bf16_ulps(g, w);
    equal += got.as<bf16>()[i].bits == want.as<bf16>()[i].bits;
    close += ulps <= 1;
    s.bad += std::isnan(g) || (ulps > 3 && err > tol);
  }
  s.rel = max_err / max_ref;
  s.bit_equal = double(equal) / double(std::max<int64_t>(n, 1));
  s.within_1ulp = double(close) / double(std::max<int64_t>(n, 1));
  return s;
}

// Whether the small-batch path takes this case (packed widths, multiples of 64, up to its limit;
// few rows; the test's allocations are 256-byte aligned).
bool small_batch_fits(const ExpertCase& c) {
  return c.T * c.top_k <= kSmallBatchRowLimit && c.H % 64 == 0 && c.I % 64 == 0 &&
         c.H <= kSmallBatchMaxWidth && c.I <= kSmallBatchMaxWidth;
}

// The grouped path on both its kernels and its three tile shapes, and the small-batch one when it
// takes the case.
std::vector<Path> paths_for(const ExpertCase& c) {
  std::vector<Path> paths{Path::kGrouped, Path::kGroupedCpAsync, Path::kGroupedShortTiles,
                          Path::kGroupedWideTiles, Path::kGroupedLongTiles};
  if (small_batch_fits(c)) paths.push_back(Path::kSmallBatch);
  return paths;
}

class CudaMoeExperts : public test::CudaTest {
 protected:
  // The GPU op on device tensors: the api op for kAuto, else cuda::moe_experts on that path.
  void run_gpu([[maybe_unused]] Path path, const TensorView& x, const TensorView& gate_up,
               const TensorView& down, const TensorView& ids, const TensorView& weights,
               const TensorView& out, const MoeLora* lora = nullptr) {
#if BEAMSERVE_CUDA
    if (path != Path::kAuto) {
      cuda::moe_experts(*gpu.cuda, x, gate_up, down, ids, weights, out, path, lora);
      return;
    }
#endif
    moe_experts(gpu, x, gate_up, down, ids, weights, out, lora);
  }

  // GPU experts on device weights, on each path, vs the CPU op on host ones (ctx: the CPU
  // context to use); each path must also repeat its own bits.
  void check(const ExpertCase& c, const ExpertData& d, const TensorView& gate_up,
             const TensorView& down, const KernelContext& cpu_ctx, const std::vector<Path>& paths) {
    HostTensor want(DType::kBF16, {c.T, c.H});
    moe_experts(cpu_ctx, d.x.view, d.gate_up.view, d.down.view, d.ids.view, d.weights.view,
                want.view);
    const TensorView x = upload(d.x), ids = upload(d.ids), weights = upload(d.weights);
    for (Path path : paths) {
      SCOPED_TRACE(::testing::Message()
                   << "experts T=" << c.T << " H=" << c.H << " E=" << c.E << " I=" << c.I
                   << " top_k=" << c.top_k << " path " << path_name(path));
      const TensorView out = device_tensor(DType::kBF16, {c.T, c.H});  // NaN: unwritten shows
      run_gpu(path, x, gate_up, down, ids, weights, out);
      HostTensor got = download(out);
      run_gpu(path, x, gate_up, down, ids, weights, out);  // same bits every run
      EXPECT_TRUE(test::bits_equal(download(out).view, got.view)) << "second run differs";
      expect_close(c, path, got, want);
    }
  }

  void expect_close(const ExpertCase& c, Path path, const HostTensor& got, const HostTensor& want) {
    const ExpertStats s = expert_stats(got.view, want.view);
    std::printf(
        "moe_experts %s T=%lld H=%lld E=%lld I=%lld k=%lld: max rel err %.3g, bit-equal %.4f, "
        "within 1 bf16 ulp %.4f\n",
        path_name(path), static_cast<long long>(c.T), static_cast<long long>(c.H),
        static_cast<long long>(c.E), static_cast<long long>(c.I), static_cast<long long>(c.top_k),
        s.rel, s.bit_equal, s.within_1ulp);
    EXPECT_EQ(s.bad, 0) << "worst element " << s.worst << ": "
                        << (s.worst >= 0 ? test::value_at(got.view, s.worst) : 0.0f) << " vs "
                        << (s.worst >= 0 ? test::value_at(want.view, s.worst) : 0.0f);
    EXPECT_LT(s.rel, 1e-2);
    // The GPU sums K in another order; a 1-ulp flip of a bf16 gate/up/act value moves the
    // outputs it feeds by 1-2 ulps (measured at Beam widths: >= 96.5% within 1 ulp, max 2 ulps).
    EXPECT_GE(s.within_1ulp, 0.95);
  }

  void check(const ExpertCase& c, const ExpertData& d) {
    check(c, d, upload_experts(d.gate_up, ExpertMatrix::kGateUp),
          upload_experts(d.down, ExpertMatrix::kDown), cpu.two, paths_for(c));
  }

  // kAuto's bits against the forced path's.
  void expect_auto_is(Path want_path, const ExpertCase& c, uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "T=" << c.T << " H=" << c.H << " I=" << c.I << " expects "
                                      << path_name(want_path));
    const ExpertData d = make_experts(c, seed);
    const TensorView x = upload(d.x), gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                     down = upload_experts(d.down, ExpertMatrix::kDown), ids = upload(d.ids),
                     weights = upload(d.weights);
    const TensorView got = device_tensor(DType::kBF16, {c.T, c.H}),
                     want = device_tensor(DType::kBF16, {c.T, c.H});
    run_gpu(Path::kAuto, x, gate_up, down, ids, weights, got);
    run_gpu(want_path, x, gate_up, down, ids, weights, want);
    EXPECT_TRUE(test::bits_equal(download(got).view, download(want).view));
  }
};

// pack_expert_weights on CUDA: with widths that are multiples of 64, element (e, row, k) of the
// row-major matrix lands in tile m's k64 step k / 64 at its row i (kernels/cuda/moe_packed.cuh:
// gate_up tile m = gate rows 8 m .. 8 m + 7, then the same up rows; down tile m = the even, then
// the odd columns of 16 m .. 16 m + 15); other widths stay row-major.
TEST_F(CudaMoeExperts, PackExpertWeightsLayout) {
  const int64_t E = 2, H = 128, I = 64;
  for (ExpertMatrix which : {ExpertMatrix::kGateUp, ExpertMatrix::kDown}) {
    const bool gate_up = which == ExpertMatrix::kGateUp;
    const int64_t rows = gate_up ? 2 * I : H, K = gate_up ? H : I;
    HostTensor w(DType::kBF16, {E, rows, K});
    for (int64_t i = 0; i < w.view.numel(); ++i)  // distinct bit patterns
      w.as<bf16>()[i].bits = static_cast<uint16_t>(0x3000 + i);
    const HostTensor packed = download(upload_experts(w, which));
    int64_t wrong = 0;
    for (int64_t e = 0; e < E; ++e)
      for (int64_t m = 0; m < rows / 16; ++m)
        for (int i = 0; i < 16; ++i)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t row =
                gate_up ? (i < 8 ? 8 * m + i : I + 8 * m + (i - 8)) : 16 * m + 2 * (i % 8) + i / 8;
            const int64_t at = e * rows * K + ((m * (K / 64) + k / 64) * 16 + i) * 64 + k % 64;
            wrong += packed.as<bf16>()[at].bits != w.as<bf16>()[(e * rows + row) * K + k].bits;
          }
    EXPECT_EQ(wrong, 0) << (gate_up ? "gate_up" : "down");
  }
  HostTensor row_major(DType::kBF16, {E, 2 * 32, 96});  // H = 96, I = 32: not packed
  for (int64_t i = 0; i < row_major.view.numel(); ++i)
    row_major.as<bf16>()[i].bits = static_cast<uint16_t>(0x3000 + i);
  EXPECT_TRUE(test::bits_equal(download(upload_experts(row_major, ExpertMatrix::kGateUp)).view,
                               row_major.view));
}

TEST_F(CudaMoeExperts, MatchCpuTinyShapes) {
  for (const ExpertCase& c : {ExpertCase{7, 64, 8, 64, 2},      // 8 experts
                              ExpertCase{1, 64, 8, 64, 2},      // 6 experts without tokens
                              ExpertCase{7, 64, 8, 32, 2},      // row-major: grouped only
                              ExpertCase{5, 40, 6, 24, 3},      // row-major, K % 32 != 0
                              ExpertCase{4, 37, 5, 19, 2},      // odd widths: grouped only
                              ExpertCase{130, 96, 4, 48, 2},    // several row tiles per expert
                              ExpertCase{130, 128, 4, 64, 2},   // the same, packed
                              ExpertCase{3, 64, 64, 64, 4},     // most experts empty
                              ExpertCase{64, 64, 8, 64, 2},     // ~16 rows per expert: 2+ passes
                              ExpertCase{5, 1000, 12, 520, 3},  // row-major, uneven K slices
                              ExpertCase{5, 960, 12, 576, 3},   // uneven K slices over the warps
                              ExpertCase{3, 5120, 4, 48, 2},    // row-major, the widest K
                              ExpertCase{3, 5120, 4, 128, 2},   // the widest K slices
                              ExpertCase{3, 128, 4, 2624, 2}})  // down K past kShortSteps
    check(c, make_experts(c, static_cast<uint32_t>(c.T * 131 + c.H)));
}

// Decode batch sizes on both paths; T * top_k reaches the small-batch path's row limit.
TEST_F(CudaMoeExperts, SmallBatchMatchCpuTinyShapes) {
  for (int64_t T : {1, 2, 5, 16, 32, 64, 128})
    for (ExpertCase c : {ExpertCase{0, 64, 8, 64, 2},     // packed widths
                         ExpertCase{0, 40, 6, 24, 3},     // row-major: grouped only
                         ExpertCase{0, 37, 5, 19, 2},     // odd widths: grouped only
                         ExpertCase{0, 64, 64, 64, 8},    // most experts empty
                         ExpertCase{0, 128, 16, 64, 16},  // T = 128: the 2048-row limit
                         ExpertCase{0, 64, 8, 0, 2}}) {   // I = 0: zeros
      c.T = T;
      check(c, make_experts(c, static_cast<uint32_t>(T * 977 + c.H + c.top_k)));
    }
}

// kAuto takes the small-batch path up to kSmallBatchMaxRows routed rows when the widths fit it,
// the grouped one beyond (bits equal to the forced path's; widths where the two paths' sums
// differ somewhere).
TEST_F(CudaMoeExperts, AutoPicksPathByRoutedRowsAndWidths) {
  for (int64_t T : {int64_t{1}, kSmallBatchMaxRows / 4, kSmallBatchMaxRows / 4 + 1}) {
    const ExpertCase c{T, 1024, 16, 256, 4};
    expect_auto_is(T * c.top_k <= kSmallBatchMaxRows ? Path::kSmallBatch : Path::kGrouped, c,
                   static_cast<uint32_t>(700 + T));
  }
  expect_auto_is(Path::kGrouped, {2, 37, 4, 19, 2}, 801);                       // odd widths
  expect_auto_is(Path::kGrouped, {2, kSmallBatchMaxWidth + 64, 4, 64, 2}, 802);  // too wide
}

// The grouped path's three tile shapes (up to 64 rows on the TMA kernel's deeper ring, 128 rows
// against two column bands, or 256) give the same bits: each output is one fp32 dot product in
// fixed K order whatever the tile's rows and bands.
// Experts with more rows than a short tile (a hot expert of 300 rows: five tiles), empty experts,
// row counts off the 16-row step, and Beam's top-8 over 64 experts at 16 rows an expert.
TEST_F(CudaMoeExperts, GroupedTileSizesKeepBits) {
  for (const ExpertCase& c : {ExpertCase{128, 512, 64, 256, 8}, ExpertCase{300, 256, 16, 128, 4},
                              ExpertCase{41, 192, 8, 320, 3}}) {
    ExpertData d = make_experts(c, static_cast<uint32_t>(900 + c.T));
    std::mt19937 rng(static_cast<uint32_t>(c.T));
    std::vector<int32_t> others(static_cast<size_t>(c.E - 2));  // experts 2..E-1
    std::iota(others.begin(), others.end(), 2);
    for (int64_t t = 0; t < c.T; ++t) {  // expert 1 on every token, expert 0 on none
      std::shuffle(others.begin(), others.end(), rng);
      int32_t* row = d.ids.as<int32_t>() + t * c.top_k;
      row[0] = 1;
      std::copy_n(others.begin(), c.top_k - 1, row + 1);
    }
    const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                     down = upload_experts(d.down, ExpertMatrix::kDown);
    check(c, d, gate_up, down, cpu.two,
          {Path::kGroupedShortTiles, Path::kGroupedWideTiles, Path::kGroupedLongTiles});
    const TensorView x = upload(d.x), ids = upload(d.ids), weights = upload(d.weights);
    const TensorView shorts = device_tensor(DType::kBF16, {c.T, c.H}),
                     wides = device_tensor(DType::kBF16, {c.T, c.H}),
                     longs = device_tensor(DType::kBF16, {c.T, c.H});
    run_gpu(Path::kGroupedShortTiles, x, gate_up, down, ids, weights, shorts);
    run_gpu(Path::kGroupedWideTiles, x, gate_up, down, ids, weights, wides);
    run_gpu(Path::kGroupedLongTiles, x, gate_up, down, ids, weights, longs);
    const HostTensor short_bits = download(shorts);
    EXPECT_TRUE(test::bits_equal(short_bits.view, download(wides).view))
        << "T=" << c.T << " E=" << c.E;
    EXPECT_TRUE(test::bits_equal(short_bits.view, download(longs).view))
        << "T=" << c.T << " E=" << c.E;
  }
}

TEST_F(CudaMoeExperts, AllTokensOnOneExpert) {
  ExpertCase c{300, 128, 8, 64, 1};
  ExpertData d = make_experts(c, 501);
  std::fill_n(d.ids.as<int32_t>(), c.T * c.top_k, 5);
  check(c, d);
  c = {100, 128, 8, 64, 2};  // every token on experts 6 and 3, and one token on 2 twice
  d = make_experts(c, 502);
  for (int64_t t = 0; t < c.T; ++t) {
    d.ids.as<int32_t>()[2 * t] = 6;
    d.ids.as<int32_t>()[2 * t + 1] = 3;
  }
  d.ids.as<int32_t>()[0] = d.ids.as<int32_t>()[1] = 2;
  check(c, d);
  // Small batches: 16 rows on one expert (two passes over its weights), and a token twice on one
  // expert next to tokens on two.
  c = {16, 128, 8, 64, 1};
  d = make_experts(c, 503);
  std::fill_n(d.ids.as<int32_t>(), c.T * c.top_k, 5);
  check(c, d);
  c = {9, 128, 8, 64, 2};
  d = make_experts(c, 504);
  for (int64_t t = 0; t < c.T; ++t) {
    d.ids.as<int32_t>()[2 * t] = 6;
    d.ids.as<int32_t>()[2 * t + 1] = 3;
  }
  d.ids.as<int32_t>()[8] = d.ids.as<int32_t>()[9] = 2;
  check(c, d);
  // 128 rows on one expert (16 passes of 8 rows), 1024 and the full 2048-row small batch on one
  // expert, and a 1024-row batch with half its slots on 4 experts.
  c = {128, 128, 8, 64, 1};
  d = make_experts(c, 505);
  std::fill_n(d.ids.as<int32_t>(), c.T * c.top_k, 7);
  check(c, d);
  c = {128, 128, 8, 64, 8};
  d = make_experts(c, 507);
  std::fill_n(d.ids.as<int32_t>(), c.T * c.top_k, 4);
  check(c, d);
  c = {256, 128, 8, 64, 8};
  d = make_experts(c, 508);
  std::fill_n(d.ids.as<int32_t>(), c.T * c.top_k, 3);
  check(c, d);
  c = {128, 128, 16, 64, 8};
  d = make_experts(c, 506);
  for (int64_t t = 0; t < c.T; ++t) {
    for (int64_t k = 0; k < 4; ++k) {
      d.ids.as<int32_t>()[t * c.top_k + 2 * k] = static_cast<int32_t>(k);
      d.ids.as<int32_t>()[t * c.top_k + 2 * k + 1] = static_cast<int32_t>(4 + (t + k) % 12);
    }
  }
  check(c, d);
}

// Slot 0 of token t on experts 0..6 with 9, 16, 17, 33, 8, 1 and 44 rows (one 16-row pass with and
// without its second half, two, three), slots 1..7 on distinct experts of 7..E-1 (~16 rows each at
// T = 128, E = 64): the small-batch path's 16-row passes at a full decode batch.
void hot_expert_routing(const ExpertCase& c, std::mt19937& rng, ExpertData& d) {
  random_routing(c, rng, d);
  // Expert i takes tokens [ends[i - 1], ends[i]).
  const int64_t ends[] = {9, 25, 42, 75, 83, 84, c.T};
  std::vector<int32_t> others(static_cast<size_t>(c.E - 7));
  for (int64_t t = 0, e = 0; t < c.T; ++t) {
    while (t >= ends[e]) ++e;
    std::iota(others.begin(), others.end(), 7);
    std::shuffle(others.begin(), others.end(), rng);
    d.ids.as<int32_t>()[t * c.top_k] = static_cast<int32_t>(e);
    for (int64_t k = 1; k < c.top_k; ++k)
      d.ids.as<int32_t>()[t * c.top_k + k] = others[static_cast<size_t>(k - 1)];
  }
}

TEST_F(CudaMoeExperts, SmallBatchWidePasses) {
  for (const ExpertCase& c : {ExpertCase{128, 64, 64, 64, 8},      // 1024 rows
                              ExpertCase{256, 64, 64, 64, 8},      // 2048 rows (172 on one)
                              ExpertCase{128, 128, 64, 64, 8},     // more K steps
                              ExpertCase{90, 960, 64, 192, 8},     // uneven K slices
                              ExpertCase{40, 64, 16, 2624, 8}}) {  // down K past kShortSteps
    ExpertData d = make_experts(c, static_cast<uint32_t>(1200 + c.H));
    std::mt19937 rng(static_cast<uint32_t>(1300 + c.H));
    hot_expert_routing(c, rng, d);
    check(c, d);
  }
}

// The first 32 tokens of a 40-token batch (320 routed rows: 16-row passes) give the bits they give
// alone (256 rows: 8-row passes), on the same experts with more rows around them.
TEST_F(CudaMoeExperts, SmallBatchPassWidthKeepsBits) {
  const ExpertCase wide{40, 256, 16, 128, 8}, narrow{32, 256, 16, 128, 8};
  ASSERT_GE(wide.T * wide.top_k, 257);
  ASSERT_LT(narrow.T * narrow.top_k, 257);
  const ExpertData d = make_experts(wide, 1400);  // ~20 rows per expert
  const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                   down = upload_experts(d.down, ExpertMatrix::kDown);
  auto run = [&](const ExpertCase& c) {
    HostTensor x(DType::kBF16, {c.T, c.H}), ids(DType::kI32, {c.T, c.top_k}),
        weights(DType::kF32, {c.T, c.top_k});
    std::memcpy(x.view.data, d.x.view.data, x.view.nbytes());
    std::memcpy(ids.view.data, d.ids.view.data, ids.view.nbytes());
    std::memcpy(weights.view.data, d.weights.view.data, weights.view.nbytes());
    const TensorView out = device_tensor(DType::kBF16, {c.T, c.H});
    run_gpu(Path::kSmallBatch, upload(x), gate_up, down, upload(ids), upload(weights), out);
    return download(out);
  };
  const HostTensor all = run(wide), alone = run(narrow);
  const TensorView head{all.view.data, DType::kBF16, {narrow.T, narrow.H}, Device::kCpu};
  EXPECT_TRUE(test::bits_equal(head, alone.view));
}

// The small-batch kernels deal units to blocks in equal counts while every expert takes one pass
// and by cost once one takes more (moe_small_batch.cuh's unit_cost): tokens 0..31 give the same
// bits whether tokens 32..39 spread over other experts (one pass each) or all sit on expert 63
// (64 rows: four 16-row passes), and the hot run matches the CPU.
TEST_F(CudaMoeExperts, SmallBatchCostDealingKeepsBits) {
  const ExpertCase c{40, 256, 64, 128, 8};
  ExpertData d = make_experts(c, 1500);
  std::mt19937 rng(1501);
  std::vector<int32_t> experts(63);
  for (int64_t t = 0; t < c.T; ++t) {  // distinct experts of 0..62 per token
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    std::copy_n(experts.begin(), c.top_k, d.ids.as<int32_t>() + t * c.top_k);
  }
  std::vector<int> rows(static_cast<size_t>(c.E), 0);
  for (int64_t i = 0; i < c.T * c.top_k; ++i) ++rows[static_cast<size_t>(d.ids.as<int32_t>()[i])];
  ASSERT_LE(*std::max_element(rows.begin(), rows.end()), 16) << "the spread run must have one pass";
  const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                   down = upload_experts(d.down, ExpertMatrix::kDown), x = upload(d.x),
                   weights = upload(d.weights);
  auto run = [&] {
    const TensorView out = device_tensor(DType::kBF16, {c.T, c.H});
    run_gpu(Path::kSmallBatch, x, gate_up, down, upload(d.ids), weights, out);
    return download(out);
  };
  const HostTensor spread = run();
  std::fill(d.ids.as<int32_t>() + 32 * c.top_k, d.ids.as<int32_t>() + c.T * c.top_k, 63);
  const HostTensor hot = run();
  const TensorView head{hot.view.data, DType::kBF16, {32, c.H}, Device::kCpu};
  EXPECT_TRUE(test::bits_equal(head, spread.view.rows(0, 32)));
  HostTensor want(DType::kBF16, {c.T, c.H});
  moe_experts(cpu.two, d.x.view, d.gate_up.view, d.down.view, d.ids.view, d.weights.view,
              want.view);
  expect_close(c, Path::kSmallBatch, hot, want);
}

// The wide kernels deal their last units at run time (moe_small_batch.cuh's pool): every launch
// computes every unit exactly once whichever block draws it, and the launch's last draw resets the
// counter for the next one, also across a grouped-path call that regrows the scratch holding it.
// E = 64 experts of width 512 at 512 routed rows give every block dozens of units and each launch
// dozens of chunks; the hot routing adds experts of two 16-row passes (cost dealing). Outputs
// start as NaN, so a unit no block computed shows.
TEST_F(CudaMoeExperts, SmallBatchPoolComputesEveryUnitOnEveryLaunch) {
  const ExpertCase c{64, 256, 64, 512, 8}, big{512, 256, 64, 512, 8};
  ASSERT_GE(c.T * c.top_k, 257) << "the wide kernels pool";
  for (const bool hot : {false, true}) {
    SCOPED_TRACE(hot ? "hot routing" : "random routing");
    ExpertData d = make_experts(c, hot ? 1601 : 1600);
    if (hot) {
      std::mt19937 rng(1602);
      hot_expert_routing(c, rng, d);
    }
    HostTensor want(DType::kBF16, {c.T, c.H});
    moe_experts(cpu.two, d.x.view, d.gate_up.view, d.down.view, d.ids.view, d.weights.view,
                want.view);
    const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                     down = upload_experts(d.down, ExpertMatrix::kDown), x = upload(d.x),
                     ids = upload(d.ids), weights = upload(d.weights);
    HostTensor first;
    for (int launch = 0; launch < 4; ++launch) {
      if (launch == 2) {  // 4,096 routed rows on the grouped path: a larger scratch
        const ExpertData b = make_experts(big, 1603);
        const TensorView out = device_tensor(DType::kBF16, {big.T, big.H});
        run_gpu(Path::kGrouped, upload(b.x), gate_up, down, upload(b.ids), upload(b.weights), out);
      }
      const TensorView out = device_tensor(DType::kBF16, {c.T, c.H});
      run_gpu(Path::kSmallBatch, x, gate_up, down, ids, weights, out);
      HostTensor got = download(out);
      if (launch == 0) {
        expect_close(c, Path::kSmallBatch, got, want);
        first = std::move(got);
      } else {
        EXPECT_TRUE(test::bits_equal(got.view, first.view)) << "launch " << launch;
      }
    }
  }
}

// The api op captured in a CUDA graph (the decode step's use) replays the eager bits, also after
// the routing in the captured ids buffer changes (grids never depend on the routing): on the
// small-batch path (T = 5, 32, 160: three launches chained by programmatic dependent launch; 160
// with 16-row passes, as in a decode graph of more than 128 sequences) and on the grouped path's
// TMA kernel, a cluster launch (T = 300: 2,400 routed rows).
TEST_F(CudaMoeExperts, GraphReplayMatchesEager) {
  for (const ExpertCase& c : {ExpertCase{5, 64, 8, 64, 2}, ExpertCase{32, 256, 64, 128, 8},
                              ExpertCase{160, 256, 64, 128, 8}, ExpertCase{300, 256, 64, 128, 8}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << c.T << " H=" << c.H << " E=" << c.E);
    ExpertData d = make_experts(c, static_cast<uint32_t>(900 + c.T));
    const TensorView x = upload(d.x), gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                     down = upload_experts(d.down, ExpertMatrix::kDown), ids = upload(d.ids),
                     weights = upload(d.weights);
    const TensorView eager = device_tensor(DType::kBF16, {c.T, c.H}),
                     graphed = device_tensor(DType::kBF16, {c.T, c.H});
    moe_experts(gpu, x, gate_up, down, ids, weights, eager);  // also sizes the scratch
    begin_graph_capture(gpu);
    moe_experts(gpu, x, gate_up, down, ids, weights, graphed);
    Expected<StepGraph> graph = end_graph_capture(gpu);
    ASSERT_TRUE(graph.ok()) << graph.error().message;
    for (int replay = 0; replay < 3; ++replay) {
      if (replay > 0) {  // new routing in the same buffers
        std::mt19937 rng(static_cast<uint32_t>(950 + replay));
        random_routing(c, rng, d);
        copy_tensor(gpu, ids, d.ids.view);
        copy_tensor(gpu, weights, d.weights.view);
        moe_experts(gpu, x, gate_up, down, ids, weights, eager);
      }
      launch_graph(gpu, graph.value());
      EXPECT_TRUE(test::bits_equal(download(graphed).view, download(eager).view))
          << "replay " << replay;
    }
  }
}

// kNoExpert slots (moe_router_route's padding tokens in a padded decode graph) take no rows on
// any path: a scattered one and a tail of padding tokens (their weights and x left nonzero) match
// the CPU (padding rows 0), and the real tokens keep the bits they get without the padding rows.
// The small-batch path's warp grouping (32 rows), its bitonic one with 8- and 16-row passes, its
// whole 1024 rows at the 128 bucket's smallest batch (65), all padding, and the grouped path at
// the 256 bucket's (129 real tokens of 256).
TEST_F(CudaMoeExperts, NoExpertSlotsTakeNoRows) {
  for (const auto& [c, real] : {std::pair{ExpertCase{4, 256, 16, 128, 8}, int64_t{3}},
                                std::pair{ExpertCase{24, 256, 64, 128, 8}, int64_t{17}},
                                std::pair{ExpertCase{40, 256, 64, 128, 8}, int64_t{33}},
                                std::pair{ExpertCase{128, 256, 64, 128, 8}, int64_t{65}},
                                std::pair{ExpertCase{8, 256, 16, 128, 8}, int64_t{0}},
                                std::pair{ExpertCase{256, 256, 64, 128, 8}, int64_t{129}}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << c.T << ", " << real << " real tokens");
    ExpertData d = make_experts(c, static_cast<uint32_t>(1600 + c.T));
    std::fill(d.ids.as<int32_t>() + real * c.top_k, d.ids.as<int32_t>() + c.T * c.top_k, kNoExpert);
    if (real > 0) d.ids.as<int32_t>()[5] = kNoExpert;  // token 0's slot 5
    const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                     down = upload_experts(d.down, ExpertMatrix::kDown);
    check(c, d, gate_up, down, cpu.two, paths_for(c));
    if (real == 0) continue;
    const TensorView x = upload(d.x), ids = upload(d.ids), weights = upload(d.weights);
    const TensorView head_x{x.data, DType::kBF16, {real, c.H}, Device::kCuda};
    const TensorView head_ids{ids.data, DType::kI32, {real, c.top_k}, Device::kCuda};
    const TensorView head_w{weights.data, DType::kF32, {real, c.top_k}, Device::kCuda};
    for (Path path : paths_for(c)) {
      SCOPED_TRACE(path_name(path));
      const TensorView padded = device_tensor(DType::kBF16, {c.T, c.H}),
                       alone = device_tensor(DType::kBF16, {real, c.H});
      run_gpu(path, x, gate_up, down, ids, weights, padded);
      run_gpu(path, head_x, gate_up, down, head_ids, head_w, alone);
      const HostTensor got = download(padded);
      EXPECT_TRUE(test::bits_equal(got.view.rows(0, real), download(alone).view));
    }
  }
}

// An f32 out (a tensor-parallel rank's partial sums) holds the sums the bf16 out rounds: on every
// path, rounding it gives the bf16 output's bits, with odd widths (one column a thread) too.
TEST_F(CudaMoeExperts, F32OutIsTheUnroundedCombine) {
  for (const ExpertCase& c : {ExpertCase{4, 256, 16, 128, 8}, ExpertCase{300, 256, 64, 128, 8},
                              ExpertCase{5, 72, 8, 40, 4}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << c.T << " H=" << c.H << " I=" << c.I);
    const ExpertData d = make_experts(c, static_cast<uint32_t>(1700 + c.T));
    const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                     down = upload_experts(d.down, ExpertMatrix::kDown);
    const TensorView x = upload(d.x), ids = upload(d.ids), weights = upload(d.weights);
    for (Path path : paths_for(c)) {
      SCOPED_TRACE(path_name(path));
      const TensorView rounded = device_tensor(DType::kBF16, {c.T, c.H}),
                       sums = device_tensor(DType::kF32, {c.T, c.H}),
                       sums_rounded = device_tensor(DType::kBF16, {c.T, c.H});
      run_gpu(path, x, gate_up, down, ids, weights, rounded);
      run_gpu(path, x, gate_up, down, ids, weights, sums);
      round_to_bf16(gpu, sums, sums_rounded);
      EXPECT_TRUE(test::bits_equal(download(sums_rounded).view, download(rounded).view));
    }
  }
}

// The router's kernels write ids and weights right before the experts on the same stream (the
// model's order; the small-batch path's first launch is a programmatic dependent of the router's
// last kernel and must wait for it before reading them): each round's output matches the CPU
// experts on the ids and weights that round routed, never the previous round's.
TEST_F(CudaMoeExperts, SmallBatchAfterRouterKernel) {
  const ExpertCase c{32, 256, 64, 128, 8};
  const RouterParams rp{.num_groups = 8, .topk_groups = 4, .top_k = 8};
  std::mt19937 rng(1101);
  ExpertData d = make_experts(c, 1100);
  for (int64_t i = 0; i < c.T * c.top_k; ++i)  // stale routing: every token on experts 0..7
    d.ids.as<int32_t>()[i] = static_cast<int32_t>(i % c.top_k);
  HostTensor router_w(DType::kF32, {c.E, c.H}), bias(DType::kF32, {c.E});
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (int64_t i = 0; i < c.E * c.H; ++i) router_w.as<float>()[i] = normal(rng);
  for (int64_t e = 0; e < c.E; ++e) bias.as<float>()[e] = 0.01f * static_cast<float>(e % 7);
  const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                   down = upload_experts(d.down, ExpertMatrix::kDown), w = upload(router_w),
                   b = upload(bias), ids = upload(d.ids), weights = upload(d.weights),
                   out = device_tensor(DType::kBF16, {c.T, c.H});
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    d.x = test::random_bf16({c.T, c.H}, rng, 1.0f);
    const TensorView x = upload(d.x);
    moe_router_route(gpu, x, w, b, rp, ids, weights);
    moe_experts(gpu, x, gate_up, down, ids, weights, out);  // kAuto: the small-batch path
    d.ids = download(ids);
    d.weights = download(weights);
    HostTensor want(DType::kBF16, {c.T, c.H});
    moe_experts(cpu.two, d.x.view, d.gate_up.view, d.down.view, d.ids.view, d.weights.view,
                want.view);
    expect_close(c, Path::kAuto, download(out), want);
  }
}

TEST_F(CudaMoeExperts, MatchCpuBeamShapes) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  // 256 experts of width 2560 over hidden 5120: 20 GB of weights, uploaded once.
  const ExpertCase full{256, 5120, 256, 2560, 8};
  ExpertData d = make_experts(full, 601);
  const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                   down = upload_experts(d.down, ExpertMatrix::kDown);
  ThreadPool pool(0);
  const KernelContext cpu_all{Device::kCpu, &pool};
  // The first T tokens of d (x, routing weights); ids from `route` when given, else d's.
  auto run = [&](int64_t T, const std::vector<int32_t>* route) {
    ExpertCase c = full;
    c.T = T;
    ExpertData part{HostTensor(DType::kBF16, {T, c.H}), HostTensor(), HostTensor(),
                    HostTensor(DType::kI32, {T, c.top_k}), HostTensor(DType::kF32, {T, c.top_k})};
    std::memcpy(part.x.view.data, d.x.view.data, part.x.view.nbytes());
    std::memcpy(part.ids.view.data, route ? route->data() : d.ids.view.data,
                part.ids.view.nbytes());
    std::memcpy(part.weights.view.data, d.weights.view.data, part.weights.view.nbytes());
    part.gate_up.view = d.gate_up.view;
    part.down.view = d.down.view;
    check(c, part, gate_up, down, cpu_all, paths_for(c));
  };
  for (int64_t T : {1, 2, 5, 16, 32, 64, 128, 256}) run(T, nullptr);  // ~8, 163, 250, 254 experts
  std::mt19937 rng(602);
  // 256 distinct experts: token t on experts 8 t .. 8 t + 7 (one row each).
  std::vector<int32_t> route(static_cast<size_t>(32 * 8));
  std::iota(route.begin(), route.end(), 0);
  std::shuffle(route.begin(), route.end(), rng);
  run(32, &route);
  // Every token on expert 17 in slot 0 (128 rows, 8 passes), its other slots random.
  route.assign(d.ids.as<int32_t>(), d.ids.as<int32_t>() + 128 * 8);
  for (int64_t t = 0; t < 128; ++t) {
    for (int64_t k = 1; k < 8; ++k)
      if (route[t * 8 + k] == 17) route[t * 8 + k] = route[t * 8];
    route[t * 8] = 17;
  }
  run(128, &route);
  // All 1024 and all 2048 slots on one expert: the small-batch path's worst skew (64 and 128
  // passes of 16 rows).
  route.assign(128 * 8, 200);
  run(128, &route);
  route.assign(256 * 8, 200);
  run(256, &route);
  // Slot 0 of each token on experts 0..6 with 9, 16, 17, 33, 8, 1 and 44 rows (16-row passes with
  // and without their second half, 2 and 3 passes), slots 1..7 on distinct experts of 7..255.
  {
    ExpertData hot{HostTensor(), HostTensor(), HostTensor(), HostTensor(DType::kI32, {128, 8}),
                   HostTensor(DType::kF32, {128, 8})};  // routing only
    ExpertCase batch128 = full;
    batch128.T = 128;
    hot_expert_routing(batch128, rng, hot);
    route.assign(hot.ids.as<int32_t>(), hot.ids.as<int32_t>() + 128 * 8);
  }
  run(128, &route);
}

// Expert LoRA on every path against the CPU op with the same adapters (the same closeness as
// without LoRA; each path repeats its bits); tokens without a slot keep the path's bits without
// LoRA; ranks of 8 and 16 (16-byte B rows) and 3 (scalar), packed and row-major widths, decode
// batches (small-batch, its wide passes) and several row tiles an expert.
TEST_F(CudaMoeExperts, LoraMatchesCpuOnEveryPath) {
  struct LoraCase {
    ExpertCase c;
    int64_t S, r;
  };
  for (const LoraCase& lc : {LoraCase{{7, 64, 8, 64, 2}, 2, 8}, LoraCase{{5, 40, 6, 24, 3}, 3, 3},
                             LoraCase{{130, 128, 4, 64, 2}, 2, 16},
                             LoraCase{{40, 128, 16, 64, 8}, 3, 16},  // 320 rows: wide passes
                             LoraCase{{40, 64, 8, 32, 4}, 2, 40},    // B rows past the cached rank
                             LoraCase{{3, 5120, 4, 128, 2}, 1, 8}}) {
    const ExpertCase& c = lc.c;
    const ExpertData d = make_experts(c, static_cast<uint32_t>(c.T * 17 + c.H));
    const test::ExpertLoraFactors l =
        test::make_expert_lora(c.T, c.H, c.E, c.I, lc.S, lc.r, static_cast<uint64_t>(c.T + lc.r));
    const MoeLora host_lora = l.lora([](const HostTensor& h) { return h.view; }, 0, c.T);
    HostTensor want(DType::kBF16, {c.T, c.H});
    moe_experts(cpu.two, d.x.view, d.gate_up.view, d.down.view, d.ids.view, d.weights.view,
                want.view, &host_lora);
    const MoeLora lora = l.lora([&](const HostTensor& h) { return upload(h); }, 0, c.T);
    const TensorView x = upload(d.x), ids = upload(d.ids), weights = upload(d.weights),
                     gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                     down = upload_experts(d.down, ExpertMatrix::kDown);
    for (Path path : paths_for(c)) {
      SCOPED_TRACE(::testing::Message()
                   << "LoRA S=" << lc.S << " r=" << lc.r << " T=" << c.T << " H=" << c.H
                   << " I=" << c.I << " path " << path_name(path));
      const TensorView out = device_tensor(DType::kBF16, {c.T, c.H});
      run_gpu(path, x, gate_up, down, ids, weights, out, &lora);
      const HostTensor got = download(out);
      run_gpu(path, x, gate_up, down, ids, weights, out, &lora);
      EXPECT_TRUE(test::bits_equal(download(out).view, got.view)) << "second run differs";
      expect_close(c, path, got, want);
      run_gpu(path, x, gate_up, down, ids, weights, out);
      const HostTensor base = download(out);
      for (int64_t t = 0; t < c.T; ++t) {
        const bool same = test::bits_equal(got.view.rows(t, 1), base.view.rows(t, 1));
        EXPECT_EQ(same, l.slot(t) == kNoLoraSlot) << "token " << t;
      }
    }
  }
}

// The grouped path's LoRA kernels take tiles of 16 grouped rows, one tensor-core pass per (expert,
// adapter slot) among them (moe_lora_mma.cu): a token's output bits do not depend on which rows
// share its tiles. The tokens in reverse order regroup every expert's rows; slots interleaved
// (several passes a tile, rows without an adapter among them) and in runs (a prefill chunk's
// sequences); ranks 16 and 40 (a k-step half past the rank), Beam's hidden width.
TEST_F(CudaMoeExperts, LoraRowsKeepBitsWhicheverRowsShareTheirTile) {
  struct LoraCase {
    ExpertCase c;
    int64_t S, r;
    bool runs;
  };
  for (const LoraCase& lc :
       {LoraCase{{96, 128, 8, 64, 4}, 3, 16, false}, LoraCase{{96, 128, 8, 64, 4}, 3, 16, true},
        LoraCase{{64, 64, 4, 32, 2}, 2, 40, false},
        LoraCase{{40, 5120, 16, 128, 4}, 2, 16, true}}) {
    const ExpertCase& c = lc.c;
    SCOPED_TRACE(::testing::Message() << "LoRA S=" << lc.S << " r=" << lc.r << " T=" << c.T
                                      << " H=" << c.H << (lc.runs ? " runs" : " interleaved"));
    const ExpertData d = make_experts(c, static_cast<uint32_t>(c.T * 31 + lc.r));
    test::ExpertLoraFactors l = test::make_expert_lora(c.T, c.H, c.E, c.I, lc.S, lc.r, 77);
    if (lc.runs) {  // slots -1, 0, .., S - 1 in runs of consecutive tokens
      for (int64_t t = 0; t < c.T; ++t)
        l.slots.as<int32_t>()[t] = static_cast<int32_t>(t * (lc.S + 1) / c.T) - 1;
    }
    const MoeLora lora = l.lora([&](const HostTensor& h) { return upload(h); }, 0, c.T);
    const HostTensor back_slots = test::reversed_rows(l.slots);
    MoeLora back_lora = lora;
    back_lora.slots = upload(back_slots);
    const TensorView gate_up = upload_experts(d.gate_up, ExpertMatrix::kGateUp),
                     down = upload_experts(d.down, ExpertMatrix::kDown);
    for (Path path : {Path::kGrouped, Path::kGroupedCpAsync}) {
      const TensorView out = device_tensor(DType::kBF16, {c.T, c.H}),
                       back = device_tensor(DType::kBF16, {c.T, c.H});
      run_gpu(path, upload(d.x), gate_up, down, upload(d.ids), upload(d.weights), out, &lora);
      run_gpu(path, upload(test::reversed_rows(d.x)), gate_up, down,
              upload(test::reversed_rows(d.ids)), upload(test::reversed_rows(d.weights)), back,
              &back_lora);
      EXPECT_TRUE(test::bits_equal(download(out).view, test::reversed_rows(download(back)).view))
          << path_name(path);
    }
  }
}

}  // namespace
}  // namespace beam
