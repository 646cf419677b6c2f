// Parameter counts, weight bytes and the memory plan, from config.json alone.
#include "model/param_count.h"

#include <gtest/gtest.h>

#include "model/memory_plan.h"
#include "test_checkpoint_writer.h"

namespace beam {
namespace {

BeamConfig beam_1_0() {
  auto c = load_beam_config(std::string(BEAMSERVE_SOURCE_DIR) + "/models/beam-1.0-config");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? *c : BeamConfig{};
}

BeamConfig tiny(bool tie = false) {
  auto c = parse_beam_config(test::tiny_config_json(tie), "config.json");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return *c;
}

TEST(ConfigParamCountTest, Beam10MatchesPublishedSizes) {
  BeamConfig c = beam_1_0();
  EXPECT_EQ(c.num_layers, 52);
  EXPECT_EQ(c.num_layers_of(AttentionKind::kSliding), 43);
  EXPECT_EQ(c.num_layers_of(AttentionKind::kFull), 9);
  EXPECT_EQ(c.layer_types.back(), AttentionKind::kFull);
  EXPECT_EQ(c.num_layers_of(MlpKind::kDense), 3);
  EXPECT_EQ(c.mlp_layer_types[2], MlpKind::kDense);
  EXPECT_EQ(c.mlp_layer_types[3], MlpKind::kSparse);
  ParamCounts p = count_params(c);
  EXPECT_NEAR(static_cast<double>(p.total()), 501e9, 0.02 * 501e9);
  EXPECT_NEAR(static_cast<double>(p.active()), 23e9, 0.05 * 23e9);
  // Components by hand (BEAM.md 1.2): experts 49 x 256 x 3 x 5120 x 2560, embeddings + head.
  EXPECT_EQ(p.experts_total, int64_t{49} * 256 * 3 * 5120 * 2560);
  EXPECT_EQ(p.experts_active, int64_t{49} * 8 * 3 * 5120 * 2560);
  EXPECT_EQ(p.embedding + p.lm_head, int64_t{2} * 151936 * 5120);
  EXPECT_EQ(p.dense_mlp, int64_t{3} * 3 * 5120 * 17408);
  EXPECT_EQ(p.routers, int64_t{49} * (256 * 5120 + 256));
  WeightBytes b = weight_bytes(c);
  EXPECT_EQ(b.f32_bytes, p.routers * 4);
  EXPECT_EQ(b.total(), (p.total() - p.routers) * 2 + p.routers * 4);
  EXPECT_EQ(c.kv_bytes_per_token_per_layer(), 2 * 8 * 128 * 2);
  EXPECT_EQ(c.kv_bytes_per_token(AttentionKind::kSliding), 43 * 4096);
  EXPECT_EQ(c.kv_bytes_per_token(AttentionKind::kFull), 9 * 4096);
}

// The count from the config equals the elements of the checkpoint the loader expects.
TEST(ConfigParamCountTest, TinyCountEqualsCheckpointTensors) {
  for (bool tie : {false, true}) {
    BeamConfig c = tiny(tie);
    int64_t numel = 0, bytes = 0;
    for (const test::TestTensor& t : test::tiny_model_tensors(c)) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      numel += n;
      bytes += static_cast<int64_t>(t.bytes.size());
    }
    ParamCounts p = count_params(c);
    EXPECT_EQ(p.total(), numel) << "tie=" << tie;
    EXPECT_EQ(weight_bytes(c).total(), bytes) << "tie=" << tie;
    EXPECT_EQ(p.total() - p.active(), 3 * (c.num_experts - c.num_experts_per_tok) * 3 * 32 * 8);
  }
}

TEST(ConfigMemoryPlanTest, TinyPlanFollowsSplitRule) {
  BeamConfig c = tiny();
  MemoryPlan p = plan_memory(c, {.gpu_memory_bytes = int64_t{4} << 30, .num_gpus = 1, .max_num_seqs = 10,
                                 .activation_reserve_bytes = int64_t{1} << 30});
  ASSERT_TRUE(p.fits) << p.reason;
  EXPECT_EQ(p.weight_bytes, weight_bytes(c).total());
  EXPECT_EQ(p.activation_reserve_bytes, int64_t{1} << 30);
  EXPECT_EQ(p.kv_heads_per_gpu, 2);
  EXPECT_EQ(p.sliding_bytes_per_token, 2 * (2 * 2 * 16 * 2));
  EXPECT_EQ(p.full_bytes_per_token, 2 * (2 * 2 * 16 * 2));
  EXPECT_EQ(p.sliding_pool_tokens, 10 * 4);
  int64_t left = (int64_t{4} << 30) - p.weight_bytes - (int64_t{1} << 30) - p.sliding_pool_bytes;
  EXPECT_EQ(p.full_pool_tokens, left / p.full_bytes_per_token);
  EXPECT_LE(p.weight_bytes + p.activation_reserve_bytes + p.sliding_pool_bytes + p.full_pool_bytes,
            p.gpu_memory_bytes);
}

TEST(ConfigMemoryPlanTest, Beam10NeedsSeveralGpus) {
  BeamConfig c = beam_1_0();
  const int64_t h200 = 141'000'000'000;
  MemoryPlan one = plan_memory(c, {.gpu_memory_bytes = h200});
  EXPECT_FALSE(one.fits);
  EXPECT_NE(one.reason.find("exceed"), std::string::npos);
  MemoryPlan eight = plan_memory(c, {.gpu_memory_bytes = h200, .num_gpus = 8, .max_num_seqs = 256});
  ASSERT_TRUE(eight.fits) << eight.reason;
  EXPECT_EQ(eight.kv_heads_per_gpu, 1);
  // A GPU rank's load holds the non-expert tensors only: ~16 GB of Beam 1.0's ~1 TB.
  const ParamCounts params = count_params(c);
  EXPECT_EQ(eight.host_load_bytes, weight_bytes(c).total() - 2 * params.experts_total);
  EXPECT_GT(eight.host_load_bytes, int64_t{15} * 1000 * 1000 * 1000);
  EXPECT_LT(eight.host_load_bytes, int64_t{17} * 1000 * 1000 * 1000);
  EXPECT_EQ(eight.activation_reserve_bytes, h200 / 25);
  EXPECT_EQ(eight.sliding_pool_tokens, 256 * 512);
  EXPECT_GT(eight.full_pool_tokens, 1'000'000);
}

}  // namespace
}  // namespace beam
