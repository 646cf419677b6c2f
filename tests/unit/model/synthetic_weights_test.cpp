// fill_random (CPU) and the beam-slice builder: deterministic values with the requested scale,
// the sliced layer pattern, tensor shapes, and a forward pass over random tiny-beam weights.
#include "model/synthetic_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "core/bf16.h"
#include "kernels/api/fill.h"
#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"

namespace beam {
namespace {

std::string models(const std::string& name) {
  return std::string(BEAMSERVE_SOURCE_DIR) + "/models/" + name;
}

KernelContext cpu(ThreadPool& pool) {
  KernelContext ctx;
  ctx.pool = &pool;
  return ctx;
}

TEST(FillRandom, DeterministicScaledAndIndependentOfThreads) {
  ThreadPool one(1), two(2);
  HostTensor a(DType::kF32, {200000}), b(DType::kF32, {200000}), c(DType::kF32, {200000});
  fill_random(cpu(one), a.view, 7, 0.02f);
  fill_random(cpu(two), b.view, 7, 0.02f);
  fill_random(cpu(two), c.view, 8, 0.02f);
  double sum = 0, sq = 0, max_abs = 0;
  int64_t differ = 0;
  for (int64_t i = 0; i < 200000; ++i) {
    const float v = a.as<float>()[i];
    ASSERT_EQ(v, b.as<float>()[i]) << i;
    differ += v != c.as<float>()[i];
    sum += v;
    sq += double(v) * v;
    max_abs = std::max(max_abs, std::fabs(double(v)));
  }
  const double mean = sum / 200000, sd = std::sqrt(sq / 200000 - mean * mean);
  EXPECT_NEAR(mean, 0.0, 2e-4);
  EXPECT_NEAR(sd, 0.02, 0.02 * 0.02);
  EXPECT_LE(max_abs, 0.02 * 3.47);  // four-uniform sum: |z| < 2·√3
  EXPECT_GT(max_abs, 0.02 * 2.5);
  EXPECT_GT(differ, 199000);
}

TEST(FillRandom, Bf16IsTheRoundedF32ValueWithMeanAndNoZeros) {
  ThreadPool pool(2);
  HostTensor f(DType::kF32, {3, 1000}), h(DType::kBF16, {3, 1000});
  fill_random(cpu(pool), f.view, 3, 0.02f, 1.0f);
  fill_random(cpu(pool), h.view, 3, 0.02f, 1.0f);
  for (int64_t i = 0; i < 3000; ++i) {
    EXPECT_EQ(to_float(h.as<bf16>()[i]), round_bf16(f.as<float>()[i])) << i;
    EXPECT_NEAR(f.as<float>()[i], 1.0f, 0.0701f);
  }
  HostTensor z(DType::kBF16, {100000});
  fill_random(cpu(pool), z.view, 11, 0.02f);
  for (int64_t i = 0; i < 100000; ++i) ASSERT_NE(to_float(z.as<bf16>()[i]), 0.0f) << i;
}

TEST(SliceConfig, BeamPatternOneDenseThenMoeEndingFull) {
  auto base = load_beam_config(models("beam-1.0-config"));
  ASSERT_TRUE(base.ok()) << base.error().message;
  auto c = slice_config(*base, {});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->num_layers, 6);
  EXPECT_EQ(c->hidden_size, 5120);
  EXPECT_EQ(c->num_experts, 256);
  for (int l = 0; l < 6; ++l) {
    EXPECT_EQ(c->layer_types[l], l == 5 ? AttentionKind::kFull : AttentionKind::kSliding) << l;
    EXPECT_EQ(c->mlp_layer_types[l], l == 0 ? MlpKind::kDense : MlpKind::kSparse) << l;
  }
  auto two = slice_config(*base, {2, 1});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->layer_types,
            (std::vector<AttentionKind>{AttentionKind::kSliding, AttentionKind::kFull}));
  auto eight = slice_config(*base, {8, 0});
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(eight->num_layers_of(AttentionKind::kFull), 2);  // layer 5 and the last
  EXPECT_EQ(eight->num_layers_of(MlpKind::kDense), 0);
  EXPECT_FALSE(slice_config(*base, {0, 0}).ok());
  auto bad = slice_config(*base, {2, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("num_dense_layers"), std::string::npos);
}

TEST(SyntheticWeights, BeamSliceSizeMatchesItsTensors) {
  auto base = load_beam_config(models("beam-1.0-config"));
  ASSERT_TRUE(base.ok());
  auto c = slice_config(*base, {});
  ASSERT_TRUE(c.ok());
  const double expert = 3.0 * 5120 * 2560 * 2, router = 256.0 * 5120 * 4;
  const double attn = (2.0 * 6144 + 2 * 1024) * 5120 * 2 + 5120.0 * 6144 * 2;
  const double expected =
      2 * 151936.0 * 5120 * 2 + 6 * attn + 3.0 * 5120 * 17408 * 2 + 5 * (256 * expert + router);
  const double got = static_cast<double>(synthetic_weight_bytes(*c));
  EXPECT_GE(got, expected);
  EXPECT_LT(got, expected + 1e6);  // alignment and the small vectors
}

TEST(SyntheticWeights, TinyBeamForwardGivesFiniteSpreadLogitsAndRouting) {
  auto base = load_beam_config(models("tiny-beam"));
  ASSERT_TRUE(base.ok());
  auto c = slice_config(*base, {3, 1});
  ASSERT_TRUE(c.ok());
  ThreadPool pool(2);
  auto w = make_synthetic_weights(cpu(pool), *c, {});
  ASSERT_TRUE(w.ok()) << w.error().message;
  const BeamWeights& bw = **w;
  EXPECT_EQ(bw.layers.size(), 3u);
  EXPECT_EQ(bw.layers[1].moe.experts_gate_up.shape,
            (Shape{c->num_experts, 2 * c->moe_intermediate_size, c->hidden_size}));
  EXPECT_EQ(bw.layers[0].dense.down.shape, (Shape{c->hidden_size, c->intermediate_size}));
  EXPECT_EQ(bw.layers[0].moe.router.data, nullptr);
  EXPECT_NE(bw.lm_head.data, bw.embed.data);
  EXPECT_NEAR(to_float(bw.final_norm.as<bf16>()[0]), 1.0f, 0.08f);

  BeamModel model(*w, cpu(pool));
  const int64_t batch = 8;
  auto kv = LocalKvCache::create(model.context(), model.config(), batch, 4);
  ASSERT_TRUE(kv.ok());
  std::vector<std::vector<int32_t>> tokens;
  ForwardBatch b;
  b.capture_routing = true;
  for (int64_t s = 0; s < batch; ++s)
    tokens.push_back({static_cast<int32_t>(3 * s + 1), static_cast<int32_t>(5 * s + 2)});
  for (int64_t s = 0; s < batch; ++s)
    b.seqs.push_back(SeqChunk{tokens[s], 0, 0, kv->block_table(s), kv->block_table(s), false});
  ForwardOutput out;
  ASSERT_TRUE(model.forward(b, kv->layers(), out).ok());
  ASSERT_EQ(out.num_rows(), batch);
  std::set<float> distinct;
  for (float v : out.logits) {
    ASSERT_TRUE(std::isfinite(v));
    distinct.insert(v);
  }
  EXPECT_GT(distinct.size(), out.logits.size() / 4);
  // Random router weights spread 16 tokens over most of tiny-beam's 16 experts (top-4).
  std::set<int32_t> experts(out.routed_experts.begin(),
                            out.routed_experts.begin() + 2 * batch * c->num_experts_per_tok);
  EXPECT_GE(experts.size(), 8u);
}

}  // namespace
}  // namespace beam
