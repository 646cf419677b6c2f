// The DFlash2 drafter (model/dflash2) against the PyTorch reference's goldens
// (tools/reference/make_tiny_drafter.py, models/tiny-beam-dflash2/golden), and the target's
// hidden-state capture (ForwardBatch::capture_layers) against the reference's features.
#include "model/dflash2/dflash2_drafter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "beam_test_util.h"
#include "core/bf16.h"
#include "core/npy.h"
#include "dflash2_goldens.h"

namespace beam {
namespace {

const char* kDrafter = "models/tiny-beam-dflash2";
const auto& kCases = testing::kDFlash2Cases;

NpyArray golden(const std::string& c, const std::string& key) {
  return testing::dflash2_golden(kDrafter, c, key);
}
std::vector<int32_t> ints(const NpyArray& a) { return testing::golden_ints(a); }

class DFlash2DrafterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = testing::load_model("tiny-beam");
    ASSERT_NE(target_, nullptr);
    auto w = load_dflash2_weights(kDrafter, target_->config);
    ASSERT_TRUE(w.ok()) << w.error().message;
    const KernelContext cpu{Device::kCpu, &pool_};
    auto contexts = DFlash2ContextPool::create(cpu, (*w)->config, 64);
    ASSERT_TRUE(contexts.ok()) << contexts.error().message;
    drafter_.emplace(*w, target_->embed, target_->lm_head, cpu, *contexts);
  }
  // The case's context from its golden features.
  std::shared_ptr<DFlash2Context> context_of(const std::string& c) {
    std::shared_ptr<DFlash2Context> ctx = drafter_->new_context();
    const HostTensor features = testing::golden_features(kDrafter, c);
    const std::vector<int32_t> p = ints(golden(c, "positions"));
    const std::vector<int64_t> positions(p.begin(), p.end());
    const DFlash2ContextRows rows{ctx.get(), 0, positions};
    const Status st = drafter_->add_context(features.view, {&rows, 1});
    EXPECT_TRUE(st.ok()) << st.error().message;
    return ctx;
  }

  ThreadPool pool_{2};
  std::shared_ptr<const BeamWeights> target_;
  std::optional<DFlash2Drafter> drafter_;
};

TEST_F(DFlash2DrafterTest, CapturedResidualsEqualTheReferenceFeatures) {
  BeamModel model(target_, KernelContext{Device::kCpu, &pool_});
  const std::vector<int32_t> tokens = ints(golden("ctx20", "tokens"));
  auto kv =
      LocalKvCache::create(model.context(), model.config(), 1, static_cast<int64_t>(tokens.size()));
  ASSERT_TRUE(kv.ok()) << kv.error().message;
  ForwardBatch batch;
  batch.capture_layers = drafter_->config().target_layer_ids;
  batch.seqs.push_back(SeqChunk{tokens, 0, 0, kv->block_table(0), kv->block_table(0), false});
  ForwardOutput out;
  ASSERT_TRUE(model.forward(batch, kv->layers(), out).ok());
  // The reference's target rounds as the engine's up to benign noise (the MoE's fp32 combine
  // order; tools/reference/README.md "Numbers"): most elements equal, each row within 1%.
  const NpyArray f = golden("ctx20", "features");
  ASSERT_EQ(static_cast<int64_t>(out.captured_hidden.size()), f.numel());
  const int64_t H = target_->config.hidden_size, rows = f.shape[0] * f.shape[1] / H;
  int64_t equal = 0;
  for (int64_t r = 0; r < rows; ++r) {  // each token's residual after each tapped layer
    double diff = 0, norm = 0;
    for (int64_t i = r * H; i < (r + 1) * H; ++i) {
      const double got = to_float(bf16{out.captured_hidden[i]}), ref = f.as<float>()[i];
      equal += got == ref;
      diff += (got - ref) * (got - ref);
      norm += ref * ref;
    }
    EXPECT_LT(std::sqrt(diff / norm), 0.01) << "token " << r / 3 << ", tap " << r % 3;
  }
  EXPECT_GE(equal, f.numel() * 9 / 10);
}

TEST_F(DFlash2DrafterTest, CaptureOfALayerOutsideTheModelIsAnError) {
  BeamModel model(target_, KernelContext{Device::kCpu, &pool_});
  auto kv = LocalKvCache::create(model.context(), model.config(), 1, 4);
  ASSERT_TRUE(kv.ok());
  const std::vector<int32_t> tokens = {5, 6, 7, 8};
  ForwardBatch batch;
  batch.capture_layers = {1, 6};
  batch.seqs.push_back(SeqChunk{tokens, 0, 0, kv->block_table(0), kv->block_table(0), false});
  ForwardOutput out;
  const Status st = model.forward(batch, kv->layers(), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("capture of layer 6"), std::string::npos) << st.error().message;
}

TEST_F(DFlash2DrafterTest, ContextKeysAndValuesEqualTheReference) {
  for (const char* name : kCases) {
    SCOPED_TRACE(name);
    testing::expect_golden_context(KernelContext{Device::kCpu, &pool_}, drafter_->pool(),
                                   *context_of(name), kDrafter, name, 0.0f, 0.0f);
  }
}

// The block's read-out and the walk against the reference (dflash2_goldens.h).
TEST_F(DFlash2DrafterTest, DraftsEqualTheReference) {
  for (const char* name : kCases) {
    SCOPED_TRACE(name);
    testing::expect_golden_block(*drafter_, *context_of(name), kDrafter, name);
  }
}

// Two blocks in one call draft what each drafts alone (rows are independent).
TEST_F(DFlash2DrafterTest, BatchedBlocksDraftAsAlone) {
  const DFlash2Config& c = drafter_->config();
  const auto a = context_of("ctx20"), b = context_of("ctx3");
  const DFlash2Block blocks[] = {{261, 20, a.get()}, {261, 3, b.get()}};
  std::vector<int32_t> both(static_cast<size_t>(2 * c.max_drafts())),
      one(static_cast<size_t>(c.max_drafts()));
  ASSERT_TRUE(drafter_->draft(blocks, both).ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(drafter_->draft({&blocks[i], 1}, one).ok());
    EXPECT_TRUE(std::equal(one.begin(), one.end(), both.begin() + i * c.max_drafts())) << i;
  }
}

TEST_F(DFlash2DrafterTest, ConfigErrorsNameTheKey) {
  const BeamConfig& t = target_->config;
  std::ifstream in(std::string(kDrafter) + "/config.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(parse_dflash2_config(text, "c.json", t).ok());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = text;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  auto error_of = [&](const std::string& json) {
    auto c = parse_dflash2_config(json, "c.json", t);
    return c.ok() ? std::string("(accepted)") : c.error().message;
  };
  EXPECT_NE(error_of(replaced("\"hidden_size\": 64", "\"hidden_size\": 32")).find("hidden_size"),
            std::string::npos);
  EXPECT_NE(error_of(replaced("\"target_layer_ids\": [", "\"target_layer_ids\": [9, "))
                .find("target_layer_ids"),
            std::string::npos);
  EXPECT_NE(error_of(replaced("\"conv_kernel_size\": 2", "\"conv_kernel_size\": 3"))
                .find("conv_kernel_size"),
            std::string::npos);
  EXPECT_NE(
      error_of(replaced("\"rope_parameters\": {", "\"rope_theta\": 500.0, \"rope_parameters\": {"))
          .find("disagrees"),
      std::string::npos);
  EXPECT_NE(error_of("{\"hidden_size\": 64}").find("c.json"), std::string::npos);
}

}  // namespace
}  // namespace beam
