// bench step --breakdown on the CPU with tiny-beam weights: every op kind of a step is reported
// with one boundary per layer it runs in, the dense and MoE layer times come from each kind's own
// model, LoRA deltas are their own op kind, and the profiler hook leaves the model's logits
// unchanged.
#include "runtime/bench/step_breakdown.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"
#include "model/config.h"
#include "model/synthetic_weights.h"
#include "runtime/bench/step_bench.h"

namespace beam {
namespace {

KernelContext cpu(ThreadPool& pool) {
  KernelContext ctx;
  ctx.pool = &pool;
  return ctx;
}

// tiny-beam cut to 3 layers (1 dense, 2 MoE) with random weights.
std::shared_ptr<const BeamWeights> tiny_weights(const KernelContext& ctx) {
  auto base = load_beam_config(std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam");
  BEAM_CHECK(base.ok()) << base.error().message;
  auto c = slice_config(*base, {3, 1});
  BEAM_CHECK(c.ok()) << c.error().message;
  auto w = make_synthetic_weights(ctx, *c, {});
  BEAM_CHECK(w.ok()) << w.error().message;
  return *w;
}

TEST(StepBreakdown, ReportsEveryOpKindOncePerLayerItRunsIn) {
  ThreadPool pool(2);
  const KernelContext ctx = cpu(pool);
  auto w = tiny_weights(ctx);
  StepBenchOptions o;
  o.batches = {2};
  o.context = 8;
  o.warmup_steps = 1;
  o.timed_steps = 1;
  o.prefill_tokens = 0;
  o.breakdown = true;
  o.breakdown_steps = 2;
  auto result = run_step_bench(ctx, w, o);
  ASSERT_TRUE(result.ok()) << result.error().message;
  const nlohmann::json& b = (*result)["decode"][0]["breakdown"];
  const int64_t L = 3, moe = 2, dense = 1;
  const std::vector<std::pair<std::string, int64_t>> calls = {
      {"setup", 1},        {"embedding", 1},     {"norms", 2 * L}, {"qkvg", L},
      {"qk_norm_rope", L}, {"store_kv", L},      {"attention", L}, {"gate", L},
      {"o_proj", L},       {"post_norm", 2 * L}, {"router", moe},  {"experts", moe},
      {"dense", dense},    {"head", 1}};
  ASSERT_EQ(b["ops"].size(), calls.size());
  double sum = 0;
  for (const auto& [name, n] : calls) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(b["ops"].contains(name));
    EXPECT_EQ(b["ops"][name]["calls"].get<int64_t>(), n);
    EXPECT_GE(b["ops"][name]["ms"].get<double>(), 0.0);
    sum += b["ops"][name]["ms"].get<double>();
  }
  EXPECT_GT(sum, 0.0);
  EXPECT_GT(b["eager_step_ms"].get<double>(), 0.0);
  EXPECT_GT(b["layers_ms_per_layer"].get<double>(), 0.0);
  // The CPU overhead figure: host time before the step is queued, a fraction of the step.
  const nlohmann::json& d = (*result)["decode"][0];
  EXPECT_FALSE(d["cuda_graphs"].get<bool>());
  EXPECT_GT(d["host_enqueue_ms"].get<double>(), 0.0);
  EXPECT_GT(d["host_overhead_fraction"].get<double>(), 0.0);
  EXPECT_LE(d["host_overhead_fraction"].get<double>(), 1.0);
  // Each kind's layer comes from a model of that kind's layers alone, less the LM head.
  const double head = d["lm_head_ms"].get<double>();
  EXPECT_NEAR(d["dense_layer_ms"].get<double>(),
              (d["dense_only_model_step_ms"].get<double>() - head) / dense, 1e-9);
  EXPECT_NEAR(d["moe_layer_ms"].get<double>(),
              (d["moe_only_model_step_ms"].get<double>() - head) / moe, 1e-9);
}

// With --lora-slots every sequence has an adapter: the deltas are an op kind of their own, one
// boundary per lora_add (q, k, v and gate together and o in each layer; the dense MLP's gate and
// up together, then down; the LM head), and the report says which slots and rank ran.
TEST(StepBreakdown, LoraDeltasAreAnOpKind) {
  ThreadPool pool(2);
  const KernelContext ctx = cpu(pool);
  auto w = tiny_weights(ctx);
  StepBenchOptions o;
  o.batches = {3};
  o.context = 8;
  o.warmup_steps = 1;
  o.timed_steps = 1;
  o.prefill_tokens = 4;
  o.prefill_reps = 1;
  o.breakdown = true;
  o.breakdown_steps = 1;
  o.lora_slots = 2;
  o.lora_rank = 4;
  auto result = run_step_bench(ctx, w, o);
  ASSERT_TRUE(result.ok()) << result.error().message;
  const int64_t L = 3, dense = 1;
  const nlohmann::json& ops = (*result)["decode"][0]["breakdown"]["ops"];
  ASSERT_TRUE(ops.contains("lora"));
  EXPECT_EQ(ops["lora"]["calls"].get<int64_t>(), 2 * L + 2 * dense + 1);
  EXPECT_GE(ops["lora"]["ms"].get<double>(), 0.0);
  EXPECT_EQ((*result)["lora"]["slots"].get<int>(), 2);
  EXPECT_EQ((*result)["lora"]["rank"].get<int>(), 4);
  EXPECT_GT((*result)["prefill"]["prefill_ms"].get<double>(), 0.0);

  o.lora_slots = 65;
  auto refused = run_step_bench(ctx, w, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("64"), std::string::npos) << refused.error().message;
}

TEST(StepBreakdown, ProfilerDoesNotChangeLogits) {
  ThreadPool pool(2);
  const KernelContext ctx = cpu(pool);
  auto w = tiny_weights(ctx);
  BreakdownProfiler profiler(ctx);
  KernelContext profiled = ctx;
  profiled.profiler = &profiler;
  std::vector<ForwardOutput> outs(2);
  for (int run = 0; run < 2; ++run) {
    BeamModel model(w, run == 0 ? ctx : profiled);
    auto kv = LocalKvCache::create(model.context(), model.config(), 1, 4);
    ASSERT_TRUE(kv.ok());
    std::vector<int32_t> tokens = {3, 17, 5};
    ForwardBatch batch;
    batch.seqs.push_back(SeqChunk{tokens, 0, 0, kv->block_table(0), kv->block_table(0), true});
    if (run == 1) profiler.start();
    ASSERT_TRUE(model.forward(batch, kv->layers(), outs[static_cast<size_t>(run)]).ok());
    if (run == 1) {
      EXPECT_EQ(profiler.finish().calls[static_cast<size_t>(StepOp::kQkvg)], 3);
    }
  }
  EXPECT_EQ(outs[0].logits, outs[1].logits);
}

}  // namespace
}  // namespace beam
