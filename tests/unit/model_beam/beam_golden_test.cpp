// Golden check of the CPU forward pass against tools/reference (models/tiny-beam/golden): per
// sequence ||Δ||/||ref|| ≤ 2e-2 (0.1 for the sequence at position 10^6), the same argmax wherever
// the reference's top-1/top-2 margin is ≥ 0.5, and the same experts wherever the reference's
// k-th/(k+1)-th choice margin exceeds 1e-3.
#include <gtest/gtest.h>

#include "beam_goldens.h"
#include "beam_test_util.h"

namespace beam::testing {
namespace {

class BeamGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = load_model("tiny-beam");
    ASSERT_NE(weights_, nullptr);
    model_ = std::make_unique<BeamModel>(weights_, KernelContext{Device::kCpu, &pool_});
    goldens_ = load_goldens("tiny-beam");
    ASSERT_GE(goldens_.size(), 8u);
  }
  ThreadPool pool_{2};
  std::shared_ptr<const BeamWeights> weights_;
  std::unique_ptr<BeamModel> model_;
  std::vector<GoldenSequence> goldens_;
};

TEST_F(BeamGolden, LogitsMatchReference) {
  const int64_t V = weights_->config.vocab_size;
  for (const auto& g : goldens_) {
    std::vector<float> ref(g.logits.as<float>(), g.logits.as<float>() + g.logits.numel());
    auto got = run_chunked(*model_, g.tokens, g.start_pos, g.chunk);
    LogitsComparison c = compare_logits(got, ref, V);
    EXPECT_LE(c.rel_error, g.tolerance()) << g.name;
    EXPECT_EQ(c.argmax_mismatches, 0) << g.name << " (" << c.rows_checked << " rows checked)";
    std::printf("golden %-12s T=%3zu start=%7lld rel_error=%.5f argmax rows checked=%lld\n", g.name.c_str(),
                g.tokens.size(), static_cast<long long>(g.start_pos), c.rel_error,
                static_cast<long long>(c.rows_checked));
  }
}

TEST_F(BeamGolden, ExpertSelectionsMatchReference) {
  const int64_t K = weights_->config.num_experts_per_tok;
  for (const auto& g : goldens_) {
    const int64_t T = static_cast<int64_t>(g.tokens.size());
    LocalKvCache kv(model_->config(), 1, T);
    ForwardBatch batch;
    batch.capture_routing = true;
    batch.seqs.push_back(SeqChunk{g.tokens, g.start_pos, 0, kv.block_table(0), kv.block_table(0), false});
    ForwardOutput out;
    ASSERT_TRUE(model_->forward(batch, kv.layers(), out).ok());
    const int64_t num_sparse = g.experts.shape[0];
    ASSERT_EQ(static_cast<int64_t>(out.routed_experts.size()), num_sparse * T * K);
    int64_t checked = 0, mismatched = 0;
    for (int64_t l = 0; l < num_sparse; ++l) {
      for (int64_t t = 0; t < T; ++t) {
        if (g.margins.as<float>()[l * T + t] <= 1e-3f) continue;  // the threshold
        ++checked;
        std::vector<int32_t> ref(g.experts.as<int32_t>() + (l * T + t) * K,
                                 g.experts.as<int32_t>() + (l * T + t + 1) * K);
        std::vector<int32_t> got(out.routed_experts.begin() + (l * T + t) * K,
                                 out.routed_experts.begin() + (l * T + t + 1) * K);
        std::sort(ref.begin(), ref.end());
        std::sort(got.begin(), got.end());
        if (ref != got) ++mismatched;
      }
    }
    EXPECT_EQ(mismatched, 0) << g.name << ": " << mismatched << " of " << checked << " selections differ";
    EXPECT_GT(checked, 0) << g.name;
  }
}

}  // namespace
}  // namespace beam::testing
