// Per-request LoRA on the GPU (model/lora_slots.h, lora_add's CUDA kernel): a mixed batch (no
// adapter, two adapters, with or without routed-expert modules) gives the CPU model's logits within
// summation-order error, the adapter-free rows of a LoRA model the base model's bits; an engine
// replaying decode graphs gives the eager engine's tokens bit for bit with adapters swapped through
// fewer slots than adapters, and for batches without adapters (graphs captured without the LoRA
// ops).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../model/test_checkpoint_writer.h"
#include "cuda_model_fixture.h"
#include "model/beam/local_kv_cache.h"
#include "model/lora_adapter.h"

namespace beam::testing {
namespace {

constexpr int kLoraRank = 8;

class LoraCudaTest : public CudaModelTest {
 protected:
  void SetUp() override {
    CudaModelTest::SetUp();
    if (IsSkipped()) return;
    host_ = load_model("tiny-beam");
    ASSERT_NE(host_, nullptr);
    auto modules = test::servable_lora_modules(host_->config);
    for (int i = 0; i < 3; ++i)
      adapters_.push_back(test::write_lora_adapter("cuda_lora_" + std::to_string(i), modules,
                                                   4 + 2 * i, 70 + 100 * i, 8));
    const auto experts = test::expert_lora_modules(host_->config);
    modules.insert(modules.end(), experts.begin(), experts.end());
    for (int i = 0; i < 2; ++i)
      expert_adapters_.push_back(test::write_lora_adapter("cuda_lora_experts_" + std::to_string(i),
                                                          modules, 4 + 4 * i, 80 + 100 * i, 8));
  }

  // A model of tiny-beam on ctx's device with two slots holding adapters 0 and 1 (with experts:
  // slots that serve the routed experts, holding the expert adapters).
  std::unique_ptr<BeamModel> lora_model(const KernelContext& ctx, bool experts = false) {
    std::shared_ptr<const BeamWeights> weights = host_;
    if (ctx.device == Device::kCuda) {
      auto uploaded = upload_weights(ctx, host_);
      EXPECT_TRUE(uploaded.ok()) << uploaded.error().message;
      if (!uploaded.ok()) return nullptr;
      weights = uploaded->weights;
    }
    auto slots = LoraSlots::create(ctx, host_->config,
                                   {.max_loras = 2, .max_rank = kLoraRank, .experts = experts});
    EXPECT_TRUE(slots.ok()) << slots.error().message;
    if (!slots.ok()) return nullptr;
    auto model = std::make_unique<BeamModel>(weights, ctx, std::move(*slots));
    for (int i = 0; i < 2; ++i) {
      auto adapter =
          LoraAdapter::open((experts ? expert_adapters_ : adapters_)[static_cast<size_t>(i)]);
      EXPECT_TRUE(adapter.ok()) << adapter.error().message;
      EXPECT_TRUE(model->lora_slots()->load(ctx, i, **adapter).ok());
    }
    return model;
  }

  // Every token's logits of each sequence (the same prompt, one slot each), in one batch.
  std::vector<std::vector<float>> run(BeamModel& model, const std::vector<int32_t>& slots) {
    const std::vector<int32_t> tokens = tokens_of(24, 5, host_->config.vocab_size);
    auto kv = LocalKvCache::create(model.context(), model.config(),
                                   static_cast<int64_t>(slots.size()), 24);
    EXPECT_TRUE(kv.ok()) << kv.error().message;
    ForwardBatch batch;
    for (size_t i = 0; i < slots.size(); ++i) {
      SeqChunk s{tokens,
                 0,
                 0,
                 kv->block_table(static_cast<int64_t>(i)),
                 kv->block_table(static_cast<int64_t>(i)),
                 true};
      s.lora_slot = slots[i];
      batch.seqs.push_back(s);
    }
    ForwardOutput out;
    const Status st = model.forward(batch, kv->layers(), out);
    EXPECT_TRUE(st.ok()) << st.error().message;
    std::vector<std::vector<float>> per_seq(slots.size());
    for (int64_t r = 0; r < out.num_rows(); ++r) {
      const auto row = out.row(r);
      auto& seq = per_seq[static_cast<size_t>(out.row_seq[static_cast<size_t>(r)])];
      seq.insert(seq.end(), row.begin(), row.end());
    }
    return per_seq;
  }

  std::shared_ptr<const BeamWeights> host_;
  std::vector<std::string> adapters_;
  std::vector<std::string> expert_adapters_;  // on the routed experts too
};

class LoraCudaMixedTest : public LoraCudaTest, public ::testing::WithParamInterface<bool> {};

// With and without the routed experts among the adapters' modules.
TEST_P(LoraCudaMixedTest, MixedAdapterBatchMatchesTheCpu) {
  auto cpu = lora_model(cpu_, GetParam());
  auto gpu = lora_model(gpu_, GetParam());
  ASSERT_TRUE(cpu && gpu);
  const std::vector<int32_t> slots{kNoLoraSlot, 0, 1};
  const auto want = run(*cpu, slots), got = run(*gpu, slots);
  const int64_t V = host_->config.vocab_size;
  for (size_t i = 0; i < slots.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "slot " << slots[i]);
    const LogitsComparison c = compare_logits(got[i], want[i], V);
    EXPECT_LT(c.rel_error, 2e-2);
    EXPECT_EQ(c.argmax_mismatches, 0);
    std::printf("slot %d: rel error %.2e over %lld rows\n", slots[i], c.rel_error,
                static_cast<long long>(c.rows_checked));
  }
  EXPECT_NE(got[1], got[2]);
  // The adapter-free row of a LoRA model is the base model's, bit for bit.
  auto base = gpu_model("tiny-beam");
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(run(*base, {kNoLoraSlot})[0], got[0]);
}

INSTANTIATE_TEST_SUITE_P(Experts, LoraCudaMixedTest, ::testing::Bool());

// Ranks past the CUDA kernel's limit are refused when the slots are made (the server's start),
// not when a step first reaches the kernel; the limit itself is taken.
TEST_F(LoraCudaTest, RanksPastTheKernelsLimitAreRefusedUpFront) {
  const int64_t limit = lora_max_rank(Device::kCuda);
  auto over = LoraSlots::create(gpu_, host_->config,
                                {.max_loras = 1, .max_rank = static_cast<int>(limit + 1)});
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("max_lora_rank"), std::string::npos) << over.error().message;
  EXPECT_TRUE(
      LoraSlots::create(gpu_, host_->config, {.max_loras = 1, .max_rank = static_cast<int>(limit)})
          .ok());
}

// Decode graphs replay the LoRA ops with the slots of the time, expert LoRA (its shrink launches
// inside the small-batch chain) included.
TEST_F(LoraCudaTest, EngineWithGraphsGivesTheEagerEnginesTokens) {
  const auto make = [&](bool graphs) {
    EngineOptions o = engine_options(Device::kCuda);
    o.cuda_graphs = graphs;
    o.max_loras = 2;  // four adapters: requests wait for slots, slots are reloaded
    o.max_lora_rank = kLoraRank;
    o.lora_experts = true;
    auto e = Engine::create(host_, o);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    if (!e.ok()) return std::unique_ptr<Engine>();
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(
          (*e)->load_lora_adapter("a" + std::to_string(i), adapters_[static_cast<size_t>(i)]).ok());
    EXPECT_TRUE((*e)->load_lora_adapter("x", expert_adapters_[0]).ok());
    return std::move(*e);
  };
  auto graphs = make(true), eager = make(false);
  ASSERT_TRUE(graphs && eager);
  std::vector<RunRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    const std::string lora = i % 4 == 3 ? "" : i == 6 ? "x" : "a" + std::to_string(i % 4);
    reqs.push_back(
        RunRequest{tokens_of(20 + i, 40 + i, host_->config.vocab_size), greedy(12), lora});
  }
  const auto want = run_all(*eager, reqs), got = run_all(*graphs, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i][0].finish, FinishReason::kLength) << i;
    EXPECT_EQ(got[i][0].tokens, want[i][0].tokens)
        << "request " << i << " (" << reqs[i].lora_name << ")";
  }
  EXPECT_NE(want[0][0].tokens,
            run_all(*eager, {RunRequest{reqs[0].prompt, greedy(12)}})[0][0].tokens);
  // Batches of base-model requests alone replay the graphs captured without the LoRA ops, then
  // adapter batches again the ones with them: each as the eager engine gives.
  for (const std::string lora : {"", "a1", "", "x"}) {
    std::vector<RunRequest> batch;
    for (int i = 0; i < 3; ++i)
      batch.push_back(
          RunRequest{tokens_of(16 + i, 90 + i, host_->config.vocab_size), greedy(10), lora});
    const auto e = run_all(*eager, batch), g = run_all(*graphs, batch);
    for (size_t i = 0; i < batch.size(); ++i)
      EXPECT_EQ(g[i][0].tokens, e[i][0].tokens) << "adapter '" << lora << "', request " << i;
  }
}

}  // namespace
}  // namespace beam::testing
