// CUDA moe_route and moe_router_route against the CPU reference ops. Routing must give identical
// ids (ties included) and weights within 1 fp32 ulp (bit-equal expected: the sigmoid uses
// kernels/cuda/torch_exp.cuh, checked here against SLEEF on the host). The routed experts are
// tested in moe_experts_test.cpp.
#include "kernels/api/moe.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/torch_math.h"
#include "kernels/cuda/torch_exp.cuh"
#if BEAMSERVE_CUDA
#include "kernels/cuda/moe.h"
#endif

namespace beam {
namespace {

int64_t f32_ulps(float a, float b) {
  auto key = [](float f) {
    const int64_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t{INT32_MIN} - i : i;
  };
  return std::llabs(key(a) - key(b));
}

// ---- torch_exp.cuh on the host: the device code's formulas, bit for bit against SLEEF --------

TEST(CudaMoeMath, TorchExpMatchesSleefBitForBit) {
  int64_t checked = 0, differ = 0;
  auto check = [&](float x) {
    const float want[3] = {cpu::torch_expf(x), cpu::torch_sigmoidf(x), cpu::torch_siluf(x)};
    const float got[3] = {torch_exp::expf(x), torch_exp::sigmoidf(x), torch_exp::siluf(x)};
    for (int i = 0; i < 3; ++i) {
      const bool same = std::bit_cast<uint32_t>(want[i]) == std::bit_cast<uint32_t>(got[i]) ||
                        (std::isnan(want[i]) && std::isnan(got[i]));
      if (!same && differ < 5)
        ADD_FAILURE() << "function " << i << " x=" << x << ": " << got[i] << " vs " << want[i];
      differ += !same;
    }
    ++checked;
  };
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099)  // every sign and exponent
    check(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  for (float x = -120.0f; x <= 120.0f; x += 1.0f / 4096)  // the router's and SwiGLU's range
    check(x);
  for (float x : {0.0f, -0.0f, 100.0f, -104.0f, 88.7f, -87.3f, 1e-30f, INFINITY, -INFINITY, NAN})
    check(x);
  EXPECT_EQ(differ, 0) << "of " << checked << " inputs";
}

// ---- moe_route ----------------------------------------------------------------------------------

class CudaMoe : public test::CudaTest {
 protected:
  std::mt19937 rng_{20261201};

  // GPU vs CPU on the given logits/bias: ids identical, weights within 1 ulp (reports exactness).
  void check_route(const HostTensor& logits, const HostTensor& bias, const RouterParams& p) {
    const int64_t T = logits.view.dim(0), E = logits.view.dim(1);
    SCOPED_TRACE(::testing::Message()
                 << "route T=" << T << " E=" << E << " groups " << p.num_groups << " keep "
                 << p.topk_groups << " top_k " << p.top_k << " norm " << p.norm_topk_prob);
    HostTensor want_ids(DType::kI32, {T, p.top_k}), want_w(DType::kF32, {T, p.top_k});
    moe_route(cpu.one, logits.view, bias.view, p, want_ids.view, want_w.view);
    const TensorView ids = device_tensor(DType::kI32, {T, p.top_k});
    const TensorView w = device_tensor(DType::kF32, {T, p.top_k});
    moe_route(gpu, upload(logits), upload(bias), p, ids, w);
    HostTensor got_ids = download(ids), got_w = download(w);
    int64_t bit_equal = 0;
    for (int64_t i = 0; i < T * p.top_k; ++i) {
      ASSERT_EQ(got_ids.as<int32_t>()[i], want_ids.as<int32_t>()[i])
          << "token " << i / p.top_k << " slot " << i % p.top_k;
      const float g = got_w.as<float>()[i], wv = want_w.as<float>()[i];
      EXPECT_LE(f32_ulps(g, wv), 1) << "token " << i / p.top_k << ": " << g << " vs " << wv;
      bit_equal += std::bit_cast<uint32_t>(g) == std::bit_cast<uint32_t>(wv);
    }
    std::printf("moe_route T=%lld E=%lld: %lld/%lld weights bit-equal\n", static_cast<long long>(T),
                static_cast<long long>(E), static_cast<long long>(bit_equal),
                static_cast<long long>(T * p.top_k));
  }

  void check_random_route(int64_t T, int64_t E, const RouterParams& p) {
    HostTensor logits = test::random_f32({T, E}, rng_, 2.0f);
    HostTensor bias = test::random_f32({E}, rng_, 0.1f);
    check_route(logits, bias, p);
  }

  // Logits and bias on coarse grids: many equal choices and equal group scores.
  void check_tied_route(int64_t T, int64_t E, const RouterParams& p) {
    HostTensor logits = test::random_f32({T, E}, rng_, 1.0f);
    HostTensor bias = test::random_f32({E}, rng_, 0.1f);
    for (int64_t i = 0; i < T * E; ++i)
      logits.as<float>()[i] = std::round(logits.as<float>()[i] * 2.0f) / 2.0f;
    for (int64_t e = 0; e < E; ++e) bias.as<float>()[e] = e % 3 == 0 ? 0.25f : 0.0f;
    std::fill_n(logits.as<float>(), E, 0.0f);  // token 0: every choice ties within its bias class
    check_route(logits, bias, p);
  }
};

TEST_F(CudaMoe, RouteMatchesCpuTinyShapes) {
  check_random_route(64, 16, {4, 2, 4, true, 2.5f});   // tiny-beam
  check_random_route(16, 16, {4, 2, 4, false, 1.0f});  // no renormalisation
  check_random_route(33, 8, {2, 1, 2, true, 1.0f});    // 8 experts, 2 groups
  check_random_route(9, 8, {1, 1, 8, true, 1.0f});     // one group, every expert chosen
  check_random_route(7, 12, {3, 2, 3, true, 1.5f});    // groups of 4, not a power of two
  check_random_route(5, 8, {8, 4, 2, true, 1.0f});     // groups of one expert
  check_random_route(3, 96, {4, 3, 6, true, 1.0f});    // 3 experts per lane
}

// The block routing's other branches: groups wider than a warp, 32 groups (4 per warp), top_k 32
// (a warp's whole ranked list), 25-expert groups straddling warps with E not a multiple of 32.
TEST_F(CudaMoe, RouteMatchesCpuWideShapes) {
  check_random_route(5, 256, {1, 1, 8, true, 1.0f});
  check_random_route(5, 256, {2, 1, 16, true, 2.5f});
  check_random_route(5, 256, {32, 8, 8, true, 2.5f});
  check_random_route(5, 256, {8, 4, 32, true, 2.5f});
  check_random_route(5, 200, {8, 3, 6, true, 1.0f});
  check_tied_route(9, 256, {32, 8, 32, true, 1.0f});
  check_tied_route(9, 200, {8, 3, 20, false, 1.0f});
}

TEST_F(CudaMoe, RouteMatchesCpuBeamShapes) {
  for (int64_t T : {1, 5, 64, 4099}) check_random_route(T, 256, {8, 4, 8, true, 2.5f});
}

TEST_F(CudaMoe, RouteTiesMatchCpu) {
  check_tied_route(16, 16, {4, 2, 4, true, 1.0f});
  check_tied_route(64, 256, {8, 4, 8, true, 2.5f});
  HostTensor logits(DType::kF32, {3, 16}), bias(DType::kF32, {16});
  std::fill_n(logits.as<float>(), 48, 0.0f);
  std::fill_n(bias.as<float>(), 16, 0.0f);
  logits.as<float>()[16 + 13] = 3.0f;  // token 1: experts 13 and 6 tie on top, groups 1 and 3 tie
  logits.as<float>()[16 + 6] = 3.0f;
  logits.as<float>()[32 + 15] = -0.0f;  // token 2: -0 and +0 logits are equal
  check_route(logits, bias, {4, 2, 4, true, 1.0f});
}

TEST_F(CudaMoe, RouteExcludedGroupsOverNegativeChoicesMatchCpu) {
  HostTensor logits(DType::kF32, {1, 16}), bias(DType::kF32, {16});
  // choice = 0.5 + bias with logits 0; the best expert (8) lies in an excluded group.
  const float choice[16] = {1, 1.1f, 1,   0.9f, -0.5f, -0.4f, -0.6f, -0.5f,
                            5, -10,  -10, -10,  -3,    -3,    -3,    -3};
  for (int e = 0; e < 16; ++e) {
    logits.as<float>()[e] = 0.0f;
    bias.as<float>()[e] = choice[e] - 0.5f;
  }
  check_route(logits, bias, {4, 2, 8, true, 1.0f});
}

// ---- moe_router_route ---------------------------------------------------------------------------

// x [T, H] bf16 and router weights [E, H] f32 whose logits are well separated: the first P columns
// of x are a one-hot code of the token (t % P) and the matching router columns hold distinct
// multiples of 1/64 per code (exact products), the other columns x ~ N(0, 1) against weights of
// 1e-6 (noise far below the 1/64 gaps, and real fp32 sums of 5120 products in both orders).
struct RouterData {
  HostTensor x, w, bias;
};

RouterData make_router(int64_t T, int64_t H, int64_t E, uint32_t seed) {
  std::mt19937 rng(seed);
  RouterData d{test::random_bf16({T, H}, rng, 1.0f), HostTensor(DType::kF32, {E, H}),
               HostTensor(DType::kF32, {E})};
  const int64_t P = std::min<int64_t>(H, 16);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t p = 0; p < P; ++p) d.x.as<bf16>()[t * H + p] = to_bf16(p == t % P ? 1.0f : 0.0f);
  std::uniform_real_distribution<float> noise(-1e-6f, 1e-6f);
  std::vector<int64_t> perm(static_cast<size_t>(E));
  for (int64_t p = 0; p < P; ++p) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t e = 0; e < E; ++e)
      d.w.as<float>()[e * H + p] = static_cast<float>(perm[e] - E / 2) / 64.0f;
  }
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = P; h < H; ++h) d.w.as<float>()[e * H + h] = noise(rng);
  std::fill_n(d.bias.as<float>(), E, 0.0f);
  return d;
}

class CudaMoeRouter : public test::CudaTest {
 protected:
  // Overwrites a device tensor with `byte` (0xff: NaN weights, id -1; 0x7f: huge weights, ids
  // far beyond E, for outputs that may hold kNoExpert): an output the op leaves unwritten shows.
  void poison(const TensorView& dev, int byte = 0xff) {
    HostTensor h(dev.dtype, dev.shape);
    std::memset(h.view.data, byte, h.view.nbytes());
    copy_tensor(gpu, dev, h.view);
  }

  // With active tokens: ids / weights bits as `all`'s before `active`, kNoExpert and 0 from it on.
  void expect_padded(const HostTensor& all_ids, const HostTensor& all_w, int64_t active,
                     const HostTensor& ids, const HostTensor& w) {
    const int64_t top_k = ids.view.dim(1);
    for (int64_t i = 0; i < ids.view.numel(); ++i) {
      const bool real = i / top_k < active;
      EXPECT_EQ(ids.as<int32_t>()[i], real ? all_ids.as<int32_t>()[i] : kNoExpert) << i;
      EXPECT_EQ(std::bit_cast<uint32_t>(w.as<float>()[i]),
                real ? std::bit_cast<uint32_t>(all_w.as<float>()[i]) : 0u)
          << i;
    }
  }

  // Device ids and weights against the CPU's linear + moe_route on (x, w, bias): ids identical,
  // weights within 1e-5 (relative); returns the largest relative difference.
  double expect_matches_cpu(const HostTensor& x, const HostTensor& w, const HostTensor& bias,
                            const RouterParams& p, const HostTensor& got_ids,
                            const HostTensor& got_w) {
    const int64_t T = x.view.dim(0);
    HostTensor want_ids(DType::kI32, {T, p.top_k}), want_w(DType::kF32, {T, p.top_k});
    moe_router_route(cpu.one, x.view, w.view, bias.view, p, want_ids.view, want_w.view);
    double max_rel = 0;
    for (int64_t i = 0; i < T * p.top_k; ++i) {
      EXPECT_EQ(got_ids.as<int32_t>()[i], want_ids.as<int32_t>()[i])
          << "token " << i / p.top_k << " slot " << i % p.top_k;
      const double g = got_w.as<float>()[i], wv = want_w.as<float>()[i];
      max_rel = std::max(max_rel, std::fabs(g - wv) / std::max(std::fabs(wv), 1e-30));
    }
    EXPECT_LE(max_rel, 1e-5);
    return max_rel;
  }

  // GPU moe_router_route vs the CPU's linear + moe_route, then the same bits on two more runs
  // whose outputs start poisoned (the fused kernel's ticket counters are left zero each run).
  void check(int64_t T, int64_t H, int64_t E, const RouterParams& p) {
    SCOPED_TRACE(::testing::Message()
                 << "router T=" << T << " H=" << H << " E=" << E << " groups " << p.num_groups
                 << " keep " << p.topk_groups << " top_k " << p.top_k);
    const RouterData d = make_router(T, H, E, static_cast<uint32_t>(T * 7 + H + E));
    const TensorView ids = device_tensor(DType::kI32, {T, p.top_k});
    const TensorView w = device_tensor(DType::kF32, {T, p.top_k});
    const TensorView x = upload(d.x), rw = upload(d.w), bias = upload(d.bias);
    moe_router_route(gpu, x, rw, bias, p, ids, w);
    HostTensor got_ids = download(ids), got_w = download(w);
    const double max_rel = expect_matches_cpu(d.x, d.w, d.bias, p, got_ids, got_w);
    for (int run = 0; run < 2; ++run) {  // same bits every run
      poison(ids);
      poison(w);
      moe_router_route(gpu, x, rw, bias, p, ids, w);
      EXPECT_TRUE(test::bits_equal(download(w).view, got_w.view)) << "run " << run + 2;
      EXPECT_TRUE(test::bits_equal(download(ids).view, got_ids.view)) << "run " << run + 2;
    }
    std::printf("moe_router_route T=%lld H=%lld E=%lld: max weight rel diff %.3g\n",
                static_cast<long long>(T), static_cast<long long>(H), static_cast<long long>(E),
                max_rel);
  }
};

// Small T (the fused tensor-core split-K logits + routing kernel: 16-byte and scalar loads, one
// to four 64-token passes, one to 128 routing blocks, partial n8 tiles) and large T (three bf16
// cuBLASLt GEMMs on the split weights where H % 8 == 0: H = 64, 1000, 5120; else the fp32 GEMM:
// H = 37, 652; then the routing over their partials).
TEST_F(CudaMoeRouter, MatchesCpuTinyShapes) {
  for (int64_t T : {1, 2, 5, 15, 16, 17, 32, 64, 100, 128, 129, 256, 257, 300}) {
    check(T, 64, 16, {4, 2, 4, true, 2.5f});     // H multiple of 4: vector loads
    check(T, 37, 8, {2, 1, 2, true, 1.0f});      // odd H: scalar loads
    check(T, 1000, 24, {3, 2, 3, false, 1.0f});  // two K splits, 24 experts: 1.5 expert tiles
    check(T, 652, 96, {4, 3, 6, true, 1.0f});    // 3 experts per lane, H % 16 == 12
  }
}

TEST_F(CudaMoeRouter, MatchesCpuBeamShapes) {
  for (int64_t T : {1, 2, 5, 15, 16, 17, 32, 64, 100, 128, 129, 256, 257, 300})
    check(T, 5120, 256, {8, 4, 8, true, 2.5f});
}

// A token's logits (so its ids and weight bits) do not depend on T or on its place in the batch
// while the fused kernel computes them: a token routed alone and inside batches of 17, 100, 128
// and 256 (two tokens per routing block).
TEST_F(CudaMoeRouter, TokenBitsIndependentOfBatch) {
  const RouterParams p{8, 4, 8, true, 2.5f};
  const int64_t H = 5120, E = 256;
  const RouterData d = make_router(256, H, E, 77);
  const TensorView rw = upload(d.w), bias = upload(d.bias);
  auto run = [&](int64_t first, int64_t T) {  // rows [first, first + T) of d.x as one batch
    HostTensor xs(DType::kBF16, {T, H});
    std::memcpy(xs.view.data, d.x.as<bf16>() + first * H, static_cast<size_t>(T * H) * 2);
    const TensorView ids = device_tensor(DType::kI32, {T, p.top_k});
    const TensorView w = device_tensor(DType::kF32, {T, p.top_k});
    moe_router_route(gpu, upload(xs), rw, bias, p, ids, w);
    return std::make_pair(download(ids), download(w));
  };
  const auto all = run(0, 256);
  for (const auto& [first, T] :
       {std::pair<int64_t, int64_t>{77, 1}, {70, 17}, {3, 100}, {128, 128}}) {
    const auto part = run(first, T);
    for (int64_t i = 0; i < T * p.top_k; ++i) {
      const int64_t j = first * p.top_k + i;
      EXPECT_EQ(part.first.as<int32_t>()[i], all.first.as<int32_t>()[j]) << first << "+" << i;
      EXPECT_EQ(std::bit_cast<uint32_t>(part.second.as<float>()[i]),
                std::bit_cast<uint32_t>(all.second.as<float>()[j]))
          << "batch at " << first << " of " << T << ", slot " << i;
    }
  }
}

// Router rows repeated every 40 experts (so in other tiles and fragment rows, groups partly equal):
// the CPU's logits tie exactly, the GPU's must too (each logit depends only on its own row and
// token), and ties go to the lower group and expert index as on the CPU.
TEST_F(CudaMoeRouter, RepeatedRowsTieAsCpu) {
  const RouterParams p{8, 4, 8, true, 2.5f};
  for (int64_t T : {1, 16, 128, 300}) {  // 300: the split bf16 GEMMs
    SCOPED_TRACE(::testing::Message() << "T=" << T);
    RouterData d = make_router(T, 5120, 256, 55);
    for (int64_t e = 40; e < 256; ++e)
      std::memcpy(d.w.as<float>() + e * 5120, d.w.as<float>() + (e % 40) * 5120, 5120 * 4);
    const TensorView ids = device_tensor(DType::kI32, {T, p.top_k});
    const TensorView w = device_tensor(DType::kF32, {T, p.top_k});
    moe_router_route(gpu, upload(d.x), upload(d.w), upload(d.bias), p, ids, w);
    expect_matches_cpu(d.x, d.w, d.bias, p, download(ids), download(w));
  }
}

// A CUDA graph of the fused kernel replays on new x, router weights and bias written into the
// captured buffers (decode steps): each replay matches the CPU on its inputs and the eager op's
// bits, so the kernel reads everything from device memory and leaves its ticket counters zero.
TEST_F(CudaMoeRouter, GraphReplaysMatchCpuAndEager) {
  const RouterParams p{8, 4, 8, true, 2.5f};
  for (int64_t T : {int64_t{1}, int64_t{32}, int64_t{128}, int64_t{256}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << T);
    const RouterData first = make_router(T, 5120, 256, 101);
    const TensorView x = upload(first.x), rw = upload(first.w), bias = upload(first.bias);
    const TensorView ids = device_tensor(DType::kI32, {T, p.top_k});
    const TensorView w = device_tensor(DType::kF32, {T, p.top_k});
    moe_router_route(gpu, x, rw, bias, p, ids, w);  // reserves the scratch outside the capture
    synchronize(gpu);
    begin_graph_capture(gpu);
    moe_router_route(gpu, x, rw, bias, p, ids, w);
    Expected<StepGraph> graph = end_graph_capture(gpu);
    ASSERT_TRUE(graph.ok()) << graph.error().message;
    for (uint32_t seed : {202u, 303u, 101u}) {
      RouterData d = make_router(T, 5120, 256, seed);
      for (int64_t e = 0; e < 256; ++e) d.bias.as<float>()[e] = 1e-3f * static_cast<float>(e % 7);
      copy_tensor(gpu, x, d.x.view);
      copy_tensor(gpu, rw, d.w.view);
      copy_tensor(gpu, bias, d.bias.view);
      poison(ids);
      poison(w);
      launch_graph(gpu, *graph);
      const HostTensor graph_ids = download(ids), graph_w = download(w);
      expect_matches_cpu(d.x, d.w, d.bias, p, graph_ids, graph_w);
      poison(ids);
      poison(w);
      moe_router_route(gpu, x, rw, bias, p, ids, w);
      EXPECT_TRUE(test::bits_equal(download(w).view, graph_w.view)) << "seed " << seed;
      EXPECT_TRUE(test::bits_equal(download(ids).view, graph_ids.view)) << "seed " << seed;
    }
  }
}

// moe_router_route's active count (a padded decode graph's batch): tokens from active[0] on get
// kNoExpert and weight 0, the others the bits they get without a count, on the fused kernel (T <=
// 256: one router, several, two tokens a router) and the split GEMMs + routing (T = 300); a CUDA
// graph replays with the count of the time.
TEST_F(CudaMoeRouter, PaddingTokensGetNoExpert) {
  const RouterParams p{8, 4, 8, true, 2.5f};
  for (int64_t T : {int64_t{1}, int64_t{5}, int64_t{256}, int64_t{300}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << T);
    const RouterData d = make_router(T, 5120, 256, 41);
    const TensorView x = upload(d.x), rw = upload(d.w), bias = upload(d.bias);
    const TensorView ids = device_tensor(DType::kI32, {T, p.top_k});
    const TensorView w = device_tensor(DType::kF32, {T, p.top_k});
    const TensorView count = device_tensor(DType::kI32, {1});
    moe_router_route(gpu, x, rw, bias, p, ids, w);
    const HostTensor all_ids = download(ids), all_w = download(w);
    HostTensor host_count(DType::kI32, {1});
    // Uploads the count, poisons the outputs, runs `route` and checks them.
    auto check_count = [&](int64_t active, const auto& route) {
      host_count.as<int32_t>()[0] = static_cast<int32_t>(active);
      copy_tensor(gpu, count, host_count.view);
      poison(ids, 0x7f);
      poison(w, 0x7f);
      route();
      expect_padded(all_ids, all_w, active, download(ids), download(w));
    };
    for (int64_t active : {int64_t{0}, int64_t{1}, T / 2, T, T + 5}) {
      SCOPED_TRACE(::testing::Message() << "active " << active);
      check_count(active, [&] { moe_router_route(gpu, x, rw, bias, p, ids, w, count); });
    }
    begin_graph_capture(gpu);
    moe_router_route(gpu, x, rw, bias, p, ids, w, count);
    Expected<StepGraph> graph = end_graph_capture(gpu);
    ASSERT_TRUE(graph.ok()) << graph.error().message;
    for (int64_t active : {T, T / 2, int64_t{0}}) {
      SCOPED_TRACE(::testing::Message() << "graph, active " << active);
      check_count(active, [&] { launch_graph(gpu, *graph); });
    }
  }
}

}  // namespace
}  // namespace beam
