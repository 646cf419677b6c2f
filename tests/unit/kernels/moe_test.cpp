// moe_route (grouped sigmoid selection, ties, exclusion, weights) and moe_experts (per-expert bf16
// GEMM outputs, SwiGLU, fp32 combine in slot order, per-request LoRA deltas) against references
// written out in the test.
#include "kernels/api/moe.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "expert_lora_factors.h"
#include "kernel_test_util.h"
#include "kernels/cpu/torch_math.h"

namespace beam {
namespace {

using test::Contexts;

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

// BEAM.md §3.10 steps 2-9 with full stable sorts (ties keep the lower index first).
Routed reference_route(const float* logits, const float* bias, int64_t E, const RouterParams& p) {
  std::vector<float> score(E), choice(E);
  for (int64_t e = 0; e < E; ++e) {
    score[e] = cpu::torch_sigmoidf(logits[e]);
    choice[e] = score[e] + bias[e];
  }
  const int64_t gsize = E / p.num_groups;
  std::vector<float> gscore(p.num_groups);
  for (int64_t g = 0; g < p.num_groups; ++g) {
    std::vector<float> v(choice.begin() + g * gsize, choice.begin() + (g + 1) * gsize);
    std::sort(v.begin(), v.end(), std::greater<>());
    gscore[g] = gsize >= 2 ? v[0] + v[1] : v[0];
  }
  std::vector<int32_t> groups(p.num_groups);
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(),
                   [&](int32_t a, int32_t b) { return gscore[a] > gscore[b]; });
  std::vector<int32_t> cand;
  for (int64_t e = 0; e < E; ++e)
    if (std::find(groups.begin(), groups.begin() + p.topk_groups, e / gsize) !=
        groups.begin() + p.topk_groups)
      cand.push_back(static_cast<int32_t>(e));
  std::stable_sort(cand.begin(), cand.end(),
                   [&](int32_t a, int32_t b) { return choice[a] > choice[b]; });
  Routed r;
  float sum = 0;
  for (int64_t k = 0; k < p.top_k; ++k) {
    r.ids.push_back(cand[k]);
    r.weights.push_back(score[cand[k]]);
    sum += score[cand[k]];
  }
  for (float& w : r.weights)
    w = (p.norm_topk_prob ? w / (sum + 1e-20f) : w) * p.routed_scaling_factor;
  return r;
}

struct RouteOut {
  HostTensor ids, weights;
};

RouteOut route(const KernelContext& ctx, const HostTensor& logits, const HostTensor& bias,
               const RouterParams& p) {
  const int64_t T = logits.view.dim(0);
  RouteOut o{HostTensor(DType::kI32, {T, p.top_k}), HostTensor(DType::kF32, {T, p.top_k})};
  moe_route(ctx, logits.view, bias.view, p, o.ids.view, o.weights.view);
  return o;
}

void check_route(int64_t T, int64_t E, const RouterParams& p, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "E=" << E << " groups " << p.num_groups << " keep "
                                    << p.topk_groups << " top_k " << p.top_k);
  Contexts ctx;
  std::mt19937 rng(seed);
  HostTensor logits = test::random_f32({T, E}, rng, 2.0f), bias = test::random_f32({E}, rng, 0.5f);
  RouteOut a = route(ctx.one, logits, bias, p), b = route(ctx.two, logits, bias, p);
  ASSERT_TRUE(test::bits_equal(a.ids.view, b.ids.view) &&
              test::bits_equal(a.weights.view, b.weights.view));
  RouterParams ungrouped = p;
  ungrouped.num_groups = ungrouped.topk_groups = 1;
  int grouping_changed = 0;
  for (int64_t t = 0; t < T; ++t) {
    Routed want = reference_route(logits.as<float>() + t * E, bias.as<float>(), E, p);
    for (int64_t k = 0; k < p.top_k; ++k) {
      ASSERT_EQ(b.ids.as<int32_t>()[t * p.top_k + k], want.ids[k]) << "t " << t << " k " << k;
      ASSERT_EQ(b.weights.as<float>()[t * p.top_k + k], want.weights[k]) << "t " << t << " k " << k;
    }
    grouping_changed +=
        reference_route(logits.as<float>() + t * E, bias.as<float>(), E, ungrouped).ids != want.ids;
  }
  if (p.topk_groups < p.num_groups) {
    EXPECT_GT(grouping_changed, 0) << "group exclusion never mattered";
  }
}

TEST(MoeRoute, MatchesReference) {
  check_route(64, 16, {4, 2, 4, true, 2.5f}, 101);   // tiny-beam
  check_route(16, 16, {4, 2, 4, false, 1.0f}, 102);  // no renormalisation
  check_route(32, 256, {8, 4, 8, true, 2.5f}, 103);  // Beam
}

// Sets choice = score + bias directly: logits 0 give score 0.5, so bias = choice - 0.5.
void set_choices(HostTensor& logits, HostTensor& bias, const std::vector<float>& choice) {
  for (size_t e = 0; e < choice.size(); ++e) {
    logits.as<float>()[e] = 0.0f;
    bias.as<float>()[e] = choice[e] - 0.5f;
  }
}

TEST(MoeRoute, ExcludedGroupsAreNeverChosenEvenOverNegativeChoices) {
  Contexts ctx;
  HostTensor logits(DType::kF32, {1, 16}), bias(DType::kF32, {16});
  // Group scores: g0 = 2, g1 = -1, g2 = 5 + -10 = -5, g3 = -6. Keep g0, g1. Expert 8 (choice 5)
  // is the best expert overall but excluded; masking excluded experts to 0 (HF DeepSeek) instead
  // of -inf would prefer them over g1's negative choices.
  set_choices(logits, bias,
              {1, 1.1f, 1, 0.9f, -0.5f, -0.4f, -0.6f, -0.5f, 5, -10, -10, -10, -3, -3, -3, -3});
  RouteOut o = route(ctx.two, logits, bias, {4, 2, 8, true, 1.0f});
  std::vector<int32_t> ids(o.ids.as<int32_t>(), o.ids.as<int32_t>() + 8);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0, 2, 3, 5, 4, 7, 6}));
}

TEST(MoeRoute, TiesGoToTheLowerIndex) {
  Contexts ctx;
  HostTensor logits(DType::kF32, {2, 16}), bias(DType::kF32, {16});
  std::fill_n(logits.as<float>(), 32, 0.0f);
  std::fill_n(bias.as<float>(), 16, 0.0f);
  // Token 0: all equal -> groups 0, 1 kept; experts 0..3. Token 1: experts 13 and 6 tie on top,
  // groups 1 and 3 tie -> order 6 then 13.
  logits.as<float>()[16 + 13] = 3.0f;
  logits.as<float>()[16 + 6] = 3.0f;
  RouteOut o = route(ctx.two, logits, bias, {4, 2, 4, true, 1.0f});
  EXPECT_EQ(std::vector<int32_t>(o.ids.as<int32_t>(), o.ids.as<int32_t>() + 4),
            (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(o.ids.as<int32_t>() + 4, o.ids.as<int32_t>() + 8),
            (std::vector<int32_t>{6, 13, 4, 5}));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(o.weights.as<float>()[k], 0.5f / (2.0f + 1e-20f));
}

// moe_router_route's active count: tokens from active[0] on are padding (ids kNoExpert, weights
// 0); the tokens before it route as without the count. Counts 0, inside, T and beyond T.
TEST(MoeRouterRoute, PaddingTokensGetNoExpert) {
  Contexts ctx;
  const int64_t T = 6, H = 32, E = 16;
  const RouterParams p{4, 2, 4, true, 2.5f};
  std::mt19937 rng(111);
  HostTensor x = test::random_bf16({T, H}, rng), w = test::random_f32({E, H}, rng, 0.2f),
             bias = test::random_f32({E}, rng, 0.1f);
  HostTensor all_ids(DType::kI32, {T, p.top_k}), all_w(DType::kF32, {T, p.top_k});
  moe_router_route(ctx.two, x.view, w.view, bias.view, p, all_ids.view, all_w.view);
  for (int32_t active : {0, 1, 4, 6, 9}) {
    SCOPED_TRACE(::testing::Message() << "active " << active);
    HostTensor count(DType::kI32, {1}), ids(DType::kI32, {T, p.top_k}),
        weights(DType::kF32, {T, p.top_k});
    count.as<int32_t>()[0] = active;
    moe_router_route(ctx.two, x.view, w.view, bias.view, p, ids.view, weights.view, count.view);
    for (int64_t i = 0; i < T * p.top_k; ++i) {
      const bool real = i / p.top_k < active;
      EXPECT_EQ(ids.as<int32_t>()[i], real ? all_ids.as<int32_t>()[i] : kNoExpert) << i;
      EXPECT_EQ(weights.as<float>()[i], real ? all_w.as<float>()[i] : 0.0f) << i;
    }
  }
}

TEST(MoeRouterRouteDeathTest, RejectsActiveOfWrongShape) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Contexts ctx;
  HostTensor x(DType::kBF16, {2, 8}), w(DType::kF32, {4, 8}), bias(DType::kF32, {4}),
      ids(DType::kI32, {2, 2}), weights(DType::kF32, {2, 2}), active(DType::kI32, {2});
  EXPECT_DEATH(moe_router_route(ctx.one, x.view, w.view, bias.view, {1, 1, 2, true, 1.0f}, ids.view,
                                weights.view, active.view),
               "active \\[2\\]");
}

// ---- moe_experts ------------------------------------------------------------------------------

struct ExpertCase {
  int64_t T, H, E, I, top_k;
};

struct ExpertData {
  HostTensor x, gate_up, down, ids, weights;
};

ExpertData make_experts(const ExpertCase& c, uint64_t seed) {
  ExpertData d{HostTensor(DType::kBF16, {c.T, c.H}), HostTensor(DType::kBF16, {c.E, 2 * c.I, c.H}),
               HostTensor(DType::kBF16, {c.E, c.H, c.I}), HostTensor(DType::kI32, {c.T, c.top_k}),
               HostTensor(DType::kF32, {c.T, c.top_k})};
  test::fill_uniform(d.x.view, seed, 2.0f);
  test::fill_uniform(d.gate_up.view, seed + 1, 0.1f);
  test::fill_uniform(d.down.view, seed + 2, 0.1f);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (int64_t t = 0; t < c.T; ++t) {  // distinct experts per token, random order and weights
    std::vector<int32_t> e(c.E);
    std::iota(e.begin(), e.end(), 0);
    std::shuffle(e.begin(), e.end(), rng);
    for (int64_t k = 0; k < c.top_k; ++k) {
      d.ids.as<int32_t>()[t * c.top_k + k] = e[k];
      d.weights.as<float>()[t * c.top_k + k] =
          std::uniform_real_distribution<float>(0.05f, 1.0f)(rng);
    }
  }
  return d;
}

using test::ExpertLoraFactors;

// The host MoeLora of tokens [t0, t0 + n).
MoeLora host_lora(const ExpertLoraFactors& l, int64_t t0, int64_t n) {
  return l.lora([](const HostTensor& h) { return h.view; }, t0, n);
}

// h = scale · A_{e,s} · in (documented dots) of one part's A.
std::vector<float> shrink(const ExpertLoraFactors& l, const HostTensor& a, int64_t e, int32_t s,
                          const float* in, int64_t width) {
  std::vector<float> h(static_cast<size_t>(l.rank));
  for (int64_t j = 0; j < l.rank; ++j)
    h[static_cast<size_t>(j)] =
        l.scale.as<float>()[s] *
        test::documented_dot(in, a.as<bf16>() + ((e * l.num_slots + s) * l.rank + j) * width,
                             width);
  return h;
}

// The delta of output row o (of out_rows) of one part's B: dot(h, B_{e,s}[o]).
float expand(const ExpertLoraFactors& l, const HostTensor& b, int64_t e, int32_t s,
             int64_t out_rows, int64_t o, const std::vector<float>& h) {
  return test::documented_dot(
      h.data(), b.as<bf16>() + ((e * l.num_slots + s) * out_rows + o) * l.rank, l.rank);
}

HostTensor run_experts(const KernelContext& ctx, const ExpertData& d, int64_t t0, int64_t n,
                       const ExpertLoraFactors* lora = nullptr) {
  HostTensor out(DType::kBF16, {n, d.x.view.dim(1)});
  const std::optional<MoeLora> l =
      lora ? std::optional<MoeLora>(host_lora(*lora, t0, n)) : std::nullopt;
  moe_experts(ctx, d.x.view.rows(t0, n), d.gate_up.view, d.down.view, d.ids.view.rows(t0, n),
              d.weights.view.rows(t0, n), out.view, l ? &*l : nullptr);
  return out;
}

// out[t, cols] per the contract with the documented dot order: every GEMM output rounded to bf16,
// SwiGLU rounded once, then Σ_k w_k * f32(y_k) in fp32 in slot order (kNoExpert slots skipped)
// and one rounding. With lora, a token on a slot gets each matrix's delta added to its rounded
// output and rounded again (kernels/api/lora.h).
void check_experts_reference(const ExpertCase& c, const ExpertData& d, const HostTensor& out,
                             int64_t num_tokens, int64_t col_step,
                             const ExpertLoraFactors* lora = nullptr) {
  int combine_matters = 0;
  for (int64_t t = 0; t < num_tokens; ++t) {
    std::vector<float> x = test::row_f32(d.x.view, t);
    const int32_t slot = lora ? lora->slot(t) : kNoLoraSlot;
    std::vector<std::vector<float>> act(c.top_k, std::vector<float>(c.I));
    for (int64_t k = 0; k < c.top_k; ++k) {
      const int64_t e = d.ids.as<int32_t>()[t * c.top_k + k];
      if (e == kNoExpert) continue;
      const bf16* gu = d.gate_up.as<bf16>() + e * 2 * c.I * c.H;
      std::vector<float> hg, hu;
      if (slot != kNoLoraSlot) {
        hg = shrink(*lora, lora->gate_a, e, slot, x.data(), c.H);
        hu = shrink(*lora, lora->up_a, e, slot, x.data(), c.H);
      }
      for (int64_t i = 0; i < c.I; ++i) {
        float g = round_bf16(test::documented_dot(x.data(), gu + i * c.H, c.H));
        float u = round_bf16(test::documented_dot(x.data(), gu + (c.I + i) * c.H, c.H));
        if (slot != kNoLoraSlot) {
          g = round_bf16(g + expand(*lora, lora->gate_b, e, slot, c.I, i, hg));
          u = round_bf16(u + expand(*lora, lora->up_b, e, slot, c.I, i, hu));
        }
        act[k][i] = round_bf16(cpu::torch_siluf(g) * u);
      }
    }
    for (int64_t h = 0; h < c.H; h += col_step) {
      float acc = 0.0f, bf16_acc = 0.0f;
      for (int64_t k = 0; k < c.top_k; ++k) {
        const int64_t e = d.ids.as<int32_t>()[t * c.top_k + k];
        if (e == kNoExpert) continue;
        const bf16* dn = d.down.as<bf16>() + (e * c.H + h) * c.I;
        float y = round_bf16(test::documented_dot(act[k].data(), dn, c.I));
        if (slot != kNoLoraSlot)
          y = round_bf16(y + expand(*lora, lora->down_b, e, slot, c.H, h,
                                    shrink(*lora, lora->down_a, e, slot, act[k].data(), c.I)));
        const float w = d.weights.as<float>()[t * c.top_k + k];
        acc = acc + w * y;
        bf16_acc = round_bf16(bf16_acc + round_bf16(w * y));
      }
      ASSERT_EQ(out.as<bf16>()[t * c.H + h].bits, to_bf16(acc).bits) << "t " << t << " h " << h;
      combine_matters += to_bf16(bf16_acc).bits != to_bf16(acc).bits;
    }
  }
  EXPECT_GT(combine_matters, 0) << "a bf16 combine would pass too";
}

// The CPU reads expert weights row-major, as they come: packing leaves them alone.
TEST(MoeExperts, PackExpertWeightsKeepsTheCpuLayout) {
  const ExpertCase c{1, 64, 4, 32, 2};
  ExpertData d = make_experts(c, 301);
  HostTensor gate_up(DType::kBF16, d.gate_up.view.shape), down(DType::kBF16, d.down.view.shape);
  std::memcpy(gate_up.view.data, d.gate_up.view.data, gate_up.view.nbytes());
  std::memcpy(down.view.data, d.down.view.data, down.view.nbytes());
  Contexts ctx;
  ASSERT_TRUE(pack_expert_weights(ctx.one, ExpertMatrix::kGateUp, d.gate_up.view).ok());
  ASSERT_TRUE(pack_expert_weights(ctx.one, ExpertMatrix::kDown, d.down.view).ok());
  EXPECT_TRUE(test::bits_equal(d.gate_up.view, gate_up.view));
  EXPECT_TRUE(test::bits_equal(d.down.view, down.view));
}

TEST(MoeExperts, MatchesReferenceTinyShapes) {
  const ExpertCase c{6, 256, 16, 128, 4};
  ExpertData d = make_experts(c, 201);
  Contexts ctx;
  HostTensor out1 = run_experts(ctx.one, d, 0, c.T), out2 = run_experts(ctx.two, d, 0, c.T);
  ASSERT_TRUE(test::bits_equal(out1.view, out2.view)) << "1 vs 2 threads differ";
  check_experts_reference(c, d, out2, c.T, 1);
  for (int64_t t = 0; t < c.T; ++t)  // a token alone gives the same bits as in the batch
    EXPECT_TRUE(test::bits_equal(run_experts(ctx.one, d, t, 1).view, out2.view.rows(t, 1))) << t;
}

// kNoExpert slots add nothing, whatever their weight: a token with one of them, a token with all
// (out 0), the other tokens' bits as without them.
TEST(MoeExperts, NoExpertSlotsAreSkipped) {
  const ExpertCase c{6, 256, 16, 128, 4};
  ExpertData d = make_experts(c, 211);
  Contexts ctx;
  const HostTensor before = run_experts(ctx.two, d, 0, c.T);
  d.ids.as<int32_t>()[1 * c.top_k + 2] = kNoExpert;
  std::fill_n(d.ids.as<int32_t>() + 4 * c.top_k, c.top_k, kNoExpert);
  const HostTensor out = run_experts(ctx.two, d, 0, c.T);
  check_experts_reference(c, d, out, c.T, 1);
  for (int64_t h = 0; h < c.H; ++h) ASSERT_EQ(out.as<bf16>()[4 * c.H + h].bits, 0) << h;
  for (int64_t t : {0, 2, 3, 5})
    EXPECT_TRUE(test::bits_equal(out.view.rows(t, 1), before.view.rows(t, 1))) << t;
}

// kNoExpert is the only negative id moe_experts takes.
TEST(MoeExpertsDeathTest, RejectsOtherNegativeIds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const ExpertCase c{2, 64, 4, 32, 2};
  ExpertData d = make_experts(c, 221);
  d.ids.as<int32_t>()[3] = -2;
  Contexts ctx;
  EXPECT_DEATH(run_experts(ctx.one, d, 0, c.T), "token 1 routed to expert -2");
}

// 130 tokens on 4 experts: each expert GEMM has 130 rows, past the OpenBLAS threshold, yet with
// the default batch_invariant context every token still matches itself computed alone.
TEST(MoeExperts, TokensIndependentOfTheBatchWithManyTokensPerExpert) {
  const ExpertCase c{130, 256, 4, 128, 4};
  ExpertData d = make_experts(c, 401);
  Contexts ctx;
  HostTensor all = run_experts(ctx.two, d, 0, c.T);
  for (int64_t t : {0, 77, 129})
    EXPECT_TRUE(test::bits_equal(run_experts(ctx.one, d, t, 1).view, all.view.rows(t, 1))) << t;
  KernelContext fast = ctx.two;
  fast.batch_invariance = BatchInvariance::kNever;
  HostTensor out(DType::kBF16, {c.T, c.H});
  moe_experts(fast, d.x.view, d.gate_up.view, d.down.view, d.ids.view, d.weights.view, out.view);
  int64_t differ = 0;
  for (int64_t i = 0; i < c.T * c.H; ++i) {
    const float a = to_float(out.as<bf16>()[i]), b = to_float(all.as<bf16>()[i]);
    EXPECT_TRUE(test::bf16_ulps(a, b) <= 2 || std::fabs(a - b) < 1e-3f)
        << i << ": " << a << " vs " << b;
    differ += a != b;
  }
  EXPECT_LT(differ, c.T * c.H / 20);
}

TEST(MoeExperts, MatchesReferenceBeamWidths) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  // Beam's hidden 5120 and expert width 2560, top-8, with 9 experts (one unused) and 2 tokens.
  const ExpertCase c{2, 5120, 9, 2560, 8};
  ExpertData d = make_experts(c, 301);
  Contexts ctx;
  HostTensor out = run_experts(ctx.two, d, 0, c.T);
  check_experts_reference(c, d, out, 1, 97);  // token 0 (token 1 checked by invariance below)
  EXPECT_TRUE(test::bits_equal(run_experts(ctx.one, d, 1, 1).view, out.view.rows(1, 1)));
}

// Per-request expert LoRA: tokens on a slot get each expert matrix's deltas (documented formula,
// bit for bit), tokens without one keep the bits they have without LoRA, one and two threads
// agree, and a token alone gets the bits it gets in the batch.
TEST(MoeExpertsLora, MatchesItsDocumentedFormulaBitForBit) {
  const ExpertCase c{9, 256, 16, 128, 4};
  ExpertData d = make_experts(c, 501);
  ExpertLoraFactors lora = test::make_expert_lora(c.T, c.H, c.E, c.I, 2, 8, 601);
  Contexts ctx;
  const HostTensor base = run_experts(ctx.two, d, 0, c.T);
  const HostTensor out1 = run_experts(ctx.one, d, 0, c.T, &lora);
  const HostTensor out2 = run_experts(ctx.two, d, 0, c.T, &lora);
  ASSERT_TRUE(test::bits_equal(out1.view, out2.view)) << "1 vs 2 threads differ";
  check_experts_reference(c, d, out2, c.T, 1, &lora);
  for (int64_t t = 0; t < c.T; ++t) {
    SCOPED_TRACE(::testing::Message() << "token " << t << " slot " << lora.slot(t));
    EXPECT_TRUE(test::bits_equal(run_experts(ctx.one, d, t, 1, &lora).view, out2.view.rows(t, 1)));
    EXPECT_EQ(test::bits_equal(out2.view.rows(t, 1), base.view.rows(t, 1)),
              lora.slot(t) == kNoLoraSlot);
  }
}

// Many tokens per expert on mixed slots (runs of one slot, as sequences come): every token still
// matches itself alone.
TEST(MoeExpertsLora, TokensIndependentOfTheBatchWithManyTokensPerExpert) {
  const ExpertCase c{70, 128, 4, 64, 2};
  ExpertData d = make_experts(c, 511);
  ExpertLoraFactors lora = test::make_expert_lora(c.T, c.H, c.E, c.I, 3, 16, 611);
  for (int64_t t = 0; t < c.T; ++t)
    lora.slots.as<int32_t>()[t] = static_cast<int32_t>((t / 9) % 4) - 1;
  Contexts ctx;
  const HostTensor all = run_experts(ctx.two, d, 0, c.T, &lora);
  check_experts_reference(c, d, all, c.T, 7, &lora);
  for (int64_t t : {0, 10, 35, 69})
    EXPECT_TRUE(test::bits_equal(run_experts(ctx.one, d, t, 1, &lora).view, all.view.rows(t, 1)))
        << t;
}

// The experts run side by side (each whole on one thread) when no expert holds more than a
// thread's share of the rows, else one after another with each GEMM split: both give the
// documented formula's bits, with LoRA too, on 1, 2 and 4 threads.
TEST(MoeExpertsLora, SideBySideAndSplitExpertsGiveTheSameBits) {
  const ExpertCase c{24, 128, 8, 64, 2};
  ExpertLoraFactors lora = test::make_expert_lora(c.T, c.H, c.E, c.I, 2, 8, 621);
  ThreadPool pool4(4);
  Contexts ctx;
  const KernelContext four{Device::kCpu, &pool4};
  for (const bool skewed : {false, true}) {
    SCOPED_TRACE(skewed ? "expert 0 holds every token's first slot" : "tokens spread");
    ExpertData d = make_experts(c, 531);
    if (skewed) {  // 24 of the 48 slots on expert 0: more than a share of 4 threads
      for (int64_t t = 0; t < c.T; ++t) {
        int32_t* ids = d.ids.as<int32_t>() + t * c.top_k;
        if (ids[1] == 0) ids[1] = ids[0];
        ids[0] = 0;
      }
    }
    const HostTensor one = run_experts(ctx.one, d, 0, c.T, &lora);
    check_experts_reference(c, d, one, c.T, 5, &lora);
    EXPECT_TRUE(test::bits_equal(run_experts(ctx.two, d, 0, c.T, &lora).view, one.view));
    EXPECT_TRUE(test::bits_equal(run_experts(four, d, 0, c.T, &lora).view, one.view));
  }
}

TEST(MoeExpertsLoraDeathTest, RejectsSlotsPastTheStacks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const ExpertCase c{2, 64, 4, 32, 2};
  ExpertData d = make_experts(c, 521);
  ExpertLoraFactors lora = test::make_expert_lora(c.T, c.H, c.E, c.I, 2, 4, 621);
  lora.slots.as<int32_t>()[1] = 2;
  Contexts ctx;
  EXPECT_DEATH(run_experts(ctx.one, d, 0, c.T, &lora), "has slot 2 of 2");
}

}  // namespace
}  // namespace beam
