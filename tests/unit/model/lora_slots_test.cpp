// LoRA adapters served per request (model/lora_slots.h, BeamModel with slots): a token on a slot
// gets its adapter's deltas (logits close to the weights merged at load, far from the base model),
// a token without a slot or on an empty slot gets the base model's logits bit for bit, a token's
// logits do not depend on the other sequences' adapters, and adapters the slots cannot serve are
// refused by name, leaving the slot empty.
#include "model/lora_slots.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"
#include "model/weights.h"
#include "test_checkpoint_writer.h"

namespace beam {
namespace {

using test::AdapterModule;

constexpr int64_t kSlotRank = 8;

// The tiny model (one dense layer, then routed-expert layers) with its weights.
struct LoraTinyModel {
  BeamConfig config;
  std::string dir;
  std::shared_ptr<BeamWeights> weights;
};

const LoraTinyModel& lora_tiny_model() {
  static const LoraTinyModel m = [] {
    LoraTinyModel t;
    auto c = parse_beam_config(test::tiny_config_json(), "config.json");
    EXPECT_TRUE(c.ok()) << c.error().message;
    t.config = *c;
    t.dir = test::make_temp_dir("lora_slots_model");
    test::write_text_file(t.dir + "/config.json", test::tiny_config_json());
    test::write_safetensors(t.dir + "/model.safetensors", test::tiny_model_tensors(t.config));
    auto w = load_beam_weights(t.dir);
    EXPECT_TRUE(w.ok()) << w.error().message;
    t.weights = *w;
    return t;
  }();
  return m;
}

std::shared_ptr<const LoraAdapter> open_adapter(const std::string& dir) {
  auto a = LoraAdapter::open(dir);
  EXPECT_TRUE(a.ok()) << a.error().message;
  return a.ok() ? *a : nullptr;
}

class LoraSlotsTest : public ::testing::Test {
 protected:
  LoraSlotsTest() : pool_(2) { ctx_.pool = &pool_; }

  std::unique_ptr<LoraSlots> make_slots(int slots, bool experts = false) {
    auto s = LoraSlots::create(ctx_, lora_tiny_model().config,
                               {.max_loras = slots, .max_rank = kSlotRank, .experts = experts});
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(*s) : nullptr;
  }

  // The logits of every token of each sequence (same tokens, one slot each), in one batch.
  std::vector<std::vector<float>> run(BeamModel& model, const std::vector<int32_t>& tokens,
                                      const std::vector<int32_t>& slots) {
    const auto T = static_cast<int64_t>(tokens.size());
    LocalKvCache kv(model.config(), static_cast<int64_t>(slots.size()), T);
    ForwardBatch batch;
    for (size_t i = 0; i < slots.size(); ++i) {
      SeqChunk s{tokens,
                 0,
                 0,
                 kv.block_table(static_cast<int64_t>(i)),
                 kv.block_table(static_cast<int64_t>(i)),
                 true};
      s.lora_slot = slots[i];
      batch.seqs.push_back(s);
    }
    ForwardOutput out;
    const Status st = model.forward(batch, kv.layers(), out);
    EXPECT_TRUE(st.ok()) << st.error().message;
    std::vector<std::vector<float>> per_seq(slots.size());
    const int64_t V = model.config().vocab_size;
    for (int64_t r = 0; r < out.num_rows(); ++r) {
      const auto row = out.row(r);
      per_seq[static_cast<size_t>(out.row_seq[static_cast<size_t>(r)])].insert(
          per_seq[static_cast<size_t>(out.row_seq[static_cast<size_t>(r)])].end(), row.begin(),
          row.begin() + V);
    }
    return per_seq;
  }

  // The logits of tokens_ on the base model and on its weights with `adapter` merged at load.
  std::pair<std::vector<float>, std::vector<float>> base_and_merged(const LoraAdapter& adapter) {
    const LoraTinyModel& m = lora_tiny_model();
    BeamModel base(m.weights, ctx_);
    auto merged_weights = load_beam_weights(m.dir, &adapter);
    EXPECT_TRUE(merged_weights.ok()) << merged_weights.error().message;
    if (!merged_weights.ok()) return {};
    BeamModel merged(*merged_weights, ctx_);
    return {run(base, tokens_, {kNoLoraSlot})[0], run(merged, tokens_, {kNoLoraSlot})[0]};
  }

  static double distance(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      num += (a[i] - b[i]) * (a[i] - b[i]);
      den += b[i] * b[i];
    }
    return std::sqrt(num / den);
  }

  ThreadPool pool_;
  KernelContext ctx_;
  const std::vector<int32_t> tokens_{5, 17, 3, 88, 41, 9, 60, 2, 33};
};

TEST_F(LoraSlotsTest, SlotTokensGetTheAdapterOthersTheBaseModelBitForBit) {
  const LoraTinyModel& m = lora_tiny_model();
  const std::string dir =
      test::write_lora_adapter("lora_all", test::servable_lora_modules(m.config), 4, 100);
  auto adapter = open_adapter(dir);
  ASSERT_NE(adapter, nullptr);
  const auto [want_base, want_merged] = base_and_merged(*adapter);

  BeamModel served(m.weights, ctx_, make_slots(3));
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 1, *adapter).ok());
  const auto got = run(served, tokens_, {kNoLoraSlot, 1, 0, 1});
  EXPECT_EQ(got[0], want_base) << "no slot: the base model's logits";
  EXPECT_EQ(got[2], want_base) << "an empty slot adds exact zeros";
  EXPECT_EQ(got[1], got[3]) << "the same adapter, the same logits";
  // The adapter's deltas are added after the base output's rounding (not merged into W): close
  // to the merged weights' logits, far from the base model's.
  const double to_merged = distance(got[1], want_merged), to_base = distance(got[1], want_base);
  EXPECT_LT(to_merged, 0.1 * to_base) << "to merged " << to_merged << ", to base " << to_base;
  EXPECT_GT(to_base, 0.05);
  std::printf("adapter logits: %.4f from the merged weights, %.4f from the base model\n", to_merged,
              to_base);

  // Alone in its batch, the adapter's sequence gets the same bits.
  EXPECT_EQ(run(served, tokens_, {1})[0], got[1]);
  // Cleared, its slot serves the base model again.
  served.lora_slots()->clear(ctx_, 1);
  EXPECT_EQ(run(served, tokens_, {1})[0], want_base);
}

// With the experts served (--lora-experts), an adapter on the routed experts too is served per
// request: its tokens' logits are close to the merged weights' and away from those of the same
// adapter without its expert modules; other tokens keep the base model's bits.
TEST_F(LoraSlotsTest, ExpertAdaptersAreServedPerRequestWhenTheSlotsServeExperts) {
  const LoraTinyModel& m = lora_tiny_model();
  std::vector<AdapterModule> modules = test::servable_lora_modules(m.config);
  const std::vector<AdapterModule> experts = test::expert_lora_modules(m.config);
  const std::string dense_only = test::write_lora_adapter("lora_no_experts", modules, 4, 700);
  modules.insert(modules.end(), experts.begin(), experts.end());
  const std::string dir = test::write_lora_adapter("lora_experts", modules, 4, 700);
  auto adapter = open_adapter(dir);
  auto without_experts = open_adapter(dense_only);
  ASSERT_TRUE(adapter && without_experts);
  const auto [want_base, want_merged] = base_and_merged(*adapter);

  BeamModel served(m.weights, ctx_, make_slots(2, true));
  ASSERT_TRUE(served.lora_slots()->serves_experts());
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 1, *adapter).ok());
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 0, *without_experts).ok());
  const auto got = run(served, tokens_, {kNoLoraSlot, 1, 0});
  EXPECT_EQ(got[0], want_base);
  const double to_merged = distance(got[1], want_merged), to_base = distance(got[1], want_base),
               to_dense_only = distance(got[1], got[2]);
  EXPECT_LT(to_merged, 0.1 * to_base) << "to merged " << to_merged << ", to base " << to_base;
  EXPECT_GT(to_dense_only, 5 * to_merged) << "the expert deltas matter";
  std::printf(
      "expert adapter logits: %.4f from the merged weights, %.4f from the base model, "
      "%.4f from the adapter without its expert modules\n",
      to_merged, to_base, to_dense_only);
  EXPECT_EQ(run(served, tokens_, {1})[0], got[1]) << "alone in its batch, the same bits";
  // Reloaded with the adapter without expert modules, the slot keeps none of the experts' factors.
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 1, *without_experts).ok());
  EXPECT_EQ(run(served, tokens_, {1})[0], got[2]);
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 1, *adapter).ok());
  EXPECT_EQ(run(served, tokens_, {1})[0], got[1]);
  served.lora_slots()->clear(ctx_, 1);
  EXPECT_EQ(run(served, tokens_, {1})[0], want_base);
}

TEST_F(LoraSlotsTest, TwoAdaptersInOneBatchKeepTheirOwnLogits) {
  const LoraTinyModel& m = lora_tiny_model();
  const std::vector<AdapterModule> targets = test::servable_lora_modules(m.config);
  auto first = open_adapter(test::write_lora_adapter("lora_first", targets, 2, 200));
  auto second = open_adapter(test::write_lora_adapter("lora_second", targets, kSlotRank, 300));
  ASSERT_TRUE(first && second);
  BeamModel served(m.weights, ctx_, make_slots(2));
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 0, *first).ok());
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 1, *second).ok());
  const auto mixed = run(served, tokens_, {1, kNoLoraSlot, 0});
  EXPECT_EQ(run(served, tokens_, {0})[0], mixed[2]);
  EXPECT_EQ(run(served, tokens_, {1})[0], mixed[0]);
  EXPECT_NE(mixed[0], mixed[2]);
  // Reloading slot 0 with the second adapter gives slot 1's logits.
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 0, *second).ok());
  EXPECT_EQ(run(served, tokens_, {0})[0], mixed[0]);
}

TEST_F(LoraSlotsTest, AdaptersTheSlotsCannotServeAreRefusedByName) {
  const LoraTinyModel& m = lora_tiny_model();
  const BeamConfig& c = m.config;
  BeamModel base(m.weights, ctx_);
  const std::vector<float> want_base = run(base, tokens_, {kNoLoraSlot})[0];
  BeamModel served(m.weights, ctx_, make_slots(1));
  auto expect_refused = [&](const std::string& name, const std::vector<AdapterModule>& targets,
                            int64_t rank, const std::string& words) {
    SCOPED_TRACE(name);
    auto adapter = open_adapter(test::write_lora_adapter(name, targets, rank, 400));
    ASSERT_NE(adapter, nullptr);
    const Status st = served.lora_slots()->load(ctx_, 0, *adapter);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find(words), std::string::npos) << st.error().message;
    EXPECT_EQ(run(served, tokens_, {0})[0], want_base) << "a refused adapter leaves the slot empty";
  };
  const AdapterModule q = test::servable_lora_modules(c)[0];
  expect_refused(
      "lora_expert",
      {q, {"model.layers.1.mlp.experts.3.up_proj.weight", c.moe_intermediate_size, c.hidden_size}},
      2,
      "model.layers.1.mlp.experts.3.up_proj.weight' is a routed expert's weight: serve expert "
      "LoRA per request with --lora-experts");
  expect_refused("lora_rank", {q}, kSlotRank + 1, "has rank 9, above the server's max LoRA rank 8");
  expect_refused("lora_shape", {{q.weight, q.out, q.in + 1}}, 2, "does not fit the module's");
  expect_refused("lora_dense_on_sparse",
                 {q, {"model.layers.1.mlp.down_proj.weight", c.hidden_size, c.intermediate_size}},
                 2, "model.layers.1.mlp.down_proj.weight' is no module per-request LoRA serves");
}

// An expert module keeps one scale a slot for all its experts: an adapter whose alpha_pattern (or
// per-expert ranks) gives two experts of one layer's module different scales is refused by name,
// one that gives different modules different scales is served.
TEST_F(LoraSlotsTest, ExpertsOfOneModuleWithDifferentScalesAreRefused) {
  const LoraTinyModel& m = lora_tiny_model();
  const BeamConfig& c = m.config;
  BeamModel served(m.weights, ctx_, make_slots(1, /*experts=*/true));
  const std::vector<AdapterModule> experts = {
      {"model.layers.1.mlp.experts.3.up_proj.weight", c.moe_intermediate_size, c.hidden_size},
      {"model.layers.1.mlp.experts.4.up_proj.weight", c.moe_intermediate_size, c.hidden_size},
      {"model.layers.1.mlp.experts.4.gate_proj.weight", c.moe_intermediate_size, c.hidden_size}};
  const auto adapter_with = [&](const std::string& name, const std::string& alpha_pattern) {
    const std::string dir = test::write_lora_adapter(name, experts, 2, 800);
    test::write_text_file(dir + "/adapter_config.json",
                          R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4, "alpha_pattern": )" +
                              alpha_pattern + "}");
    return open_adapter(dir);
  };
  auto split = adapter_with("lora_split_experts", R"({"experts.3.up_proj": 2})");
  auto by_module = adapter_with("lora_by_module", R"({"gate_proj": 2})");
  ASSERT_TRUE(split && by_module);
  const Status st = served.lora_slots()->load(ctx_, 0, *split);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("need one LoRA scale"), std::string::npos)
      << st.error().message;
  EXPECT_NE(st.error().message.find("lora_split_experts"), std::string::npos) << st.error().message;
  EXPECT_TRUE(served.lora_slots()->load(ctx_, 0, *by_module).ok());
}

// RL loops save the adapter to the same folder every step: the adapter read before keeps its
// factors (a copy, not a mapping that a truncated file would turn into SIGBUS).
TEST_F(LoraSlotsTest, AnAdapterKeepsItsFactorsWhenItsFileIsRewritten) {
  const LoraTinyModel& m = lora_tiny_model();
  const auto modules = test::servable_lora_modules(m.config);
  const std::string dir = test::write_lora_adapter("lora_rewritten", modules, 4, 500);
  auto adapter = open_adapter(dir);
  ASSERT_NE(adapter, nullptr);
  BeamModel served(m.weights, ctx_, make_slots(1));
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 0, *adapter).ok());
  const std::vector<float> before = run(served, tokens_, {0})[0];
  test::write_text_file(dir + "/adapter_model.safetensors", "truncated");
  ASSERT_TRUE(served.lora_slots()->load(ctx_, 0, *adapter).ok());  // read again from the copy
  EXPECT_EQ(run(served, tokens_, {0})[0], before);
}

TEST_F(LoraSlotsTest, SlotCountsAndRanksAreBounded) {
  const BeamConfig& c = lora_tiny_model().config;
  for (auto [slots, rank] : {std::pair{0, 8}, {65, 8}, {1, 0}, {1, 513}}) {
    auto s = LoraSlots::create(ctx_, c, {.max_loras = slots, .max_rank = rank});
    EXPECT_FALSE(s.ok()) << slots << " slots of rank " << rank;
  }
  // A sequence naming a slot the model lacks is an error of that step, not an abort.
  BeamModel served(lora_tiny_model().weights, ctx_, make_slots(1));
  LocalKvCache kv(c, 1, 4);
  ForwardBatch batch;
  const std::vector<int32_t> tokens{1, 2};
  SeqChunk s{tokens, 0, 0, kv.block_table(0), kv.block_table(0), false};
  s.lora_slot = 1;
  batch.seqs.push_back(s);
  ForwardOutput out;
  const Status st = served.forward(batch, kv.layers(), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("LoRA slot 1 outside the model's 1 slots"), std::string::npos)
      << st.error().message;
}

}  // namespace
}  // namespace beam
