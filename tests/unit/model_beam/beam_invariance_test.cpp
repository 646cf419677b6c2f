// Invariance of the forward pass on models/tiny-beam: prefill-then-decode, chunked prefill and a
// batch of sequences of different lengths all match one full prefill within the golden tolerance;
// a released eager workspace comes back with the same logits.
#include <gtest/gtest.h>

#include "beam_test_util.h"

namespace beam::testing {
namespace {

constexpr double kTolerance = 2e-2;

class BeamInvariance : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = load_model("tiny-beam");
    ASSERT_NE(weights_, nullptr);
    model_ = std::make_unique<BeamModel>(weights_, KernelContext{Device::kCpu, &pool_});
  }
  int64_t vocab() const { return weights_->config.vocab_size; }
  void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
    LogitsComparison c = compare_logits(got, ref, vocab());
    EXPECT_LE(c.rel_error, kTolerance) << what;
    EXPECT_EQ(c.argmax_mismatches, 0) << what << " (" << c.rows_checked << " rows checked)";
  }

  ThreadPool pool_{2};
  std::shared_ptr<const BeamWeights> weights_;
  std::unique_ptr<BeamModel> model_;
};

TEST_F(BeamInvariance, ChunkedPrefillMatchesFullPrefill) {
  auto tokens = random_tokens(45, vocab(), 7);
  auto full = run_chunked(*model_, tokens, 0, 0);
  for (int64_t chunk : {1, 3, 7}) {
    expect_close(run_chunked(*model_, tokens, 0, chunk), full, "chunk " + std::to_string(chunk));
  }
}

TEST_F(BeamInvariance, PrefillThenDecodeMatchesFullPrefill) {
  auto tokens = random_tokens(60, vocab(), 11);
  auto full = run_chunked(*model_, tokens, 0, 0);
  LocalKvCache kv(model_->config(), 1, 60);
  std::vector<float> got;
  ForwardOutput out;
  ForwardBatch prefill;
  prefill.seqs.push_back(SeqChunk{std::span<const int32_t>(tokens.data(), 10), 0, 0, kv.block_table(0),
                                  kv.block_table(0), true});
  ASSERT_TRUE(model_->forward(prefill, kv.layers(), out).ok());
  got = out.logits;
  for (int64_t i = 10; i < 60; ++i) {
    ForwardBatch step;
    step.seqs.push_back(SeqChunk{std::span<const int32_t>(tokens.data() + i, 1), 0, i, kv.block_table(0),
                                 kv.block_table(0), false});
    ASSERT_TRUE(model_->forward(step, kv.layers(), out).ok());
    ASSERT_EQ(out.num_rows(), 1);
    ASSERT_EQ(out.row_position[0], i);
    got.insert(got.end(), out.logits.begin(), out.logits.end());
  }
  expect_close(got, full, "prefill 10 then decode to 60");
}

// Sleep mode frees the eager steps' activations between steps; the next step allocates them
// again and gives the same logits, bit for bit.
TEST_F(BeamInvariance, ReleasedEagerWorkspaceComesBackWithTheSameLogits) {
  auto tokens = random_tokens(30, vocab(), 13);
  const std::vector<float> before = run_chunked(*model_, tokens, 0, 0);
  const size_t freed = model_->release_eager_workspace();
  EXPECT_GE(freed,
            tokens.size() * static_cast<size_t>(vocab()) * sizeof(float));  // every row's logits
  EXPECT_EQ(model_->release_eager_workspace(), 0u);                         // nothing left to free
  EXPECT_EQ(run_chunked(*model_, tokens, 0, 0), before);
}

TEST_F(BeamInvariance, BatchOfDifferentLengthsMatchesEachAlone) {
  const std::vector<int64_t> lengths = {5, 17, 33, 48};
  const std::vector<int64_t> starts = {0, 3, 0, 1000};
  std::vector<std::vector<int32_t>> seqs;
  for (size_t i = 0; i < lengths.size(); ++i) seqs.push_back(random_tokens(lengths[i], vocab(), 100 + i));
  LocalKvCache kv(model_->config(), static_cast<int64_t>(seqs.size()), 48);
  ForwardBatch batch;
  for (size_t i = 0; i < seqs.size(); ++i)
    batch.seqs.push_back(SeqChunk{seqs[i], starts[i], 0, kv.block_table(i), kv.block_table(i), true});
  ForwardOutput out;
  ASSERT_TRUE(model_->forward(batch, kv.layers(), out).ok());
  int64_t row = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    auto alone = run_chunked(*model_, seqs[i], starts[i], 0);
    std::vector<float> got(out.logits.begin() + row * vocab(),
                           out.logits.begin() + (row + lengths[i]) * vocab());
    row += lengths[i];
    expect_close(got, alone, "sequence " + std::to_string(i) + " in a batch of 4");
  }
}

TEST_F(BeamInvariance, MixedDecodeAndPrefillBatch) {
  // Sequence 0 decodes while sequence 1 prefills a chunk in the same step.
  auto a = random_tokens(30, vocab(), 21), b = random_tokens(20, vocab(), 22);
  auto full_a = run_chunked(*model_, a, 0, 0), full_b = run_chunked(*model_, b, 0, 0);
  LocalKvCache kv(model_->config(), 2, 30);
  ForwardOutput out;
  ForwardBatch first;
  first.seqs.push_back(SeqChunk{std::span<const int32_t>(a.data(), 29), 0, 0, kv.block_table(0), kv.block_table(0), false});
  ASSERT_TRUE(model_->forward(first, kv.layers(), out).ok());
  ForwardBatch mixed;
  mixed.seqs.push_back(SeqChunk{std::span<const int32_t>(a.data() + 29, 1), 0, 29, kv.block_table(0), kv.block_table(0), false});
  mixed.seqs.push_back(SeqChunk{b, 0, 0, kv.block_table(1), kv.block_table(1), true});
  ASSERT_TRUE(model_->forward(mixed, kv.layers(), out).ok());
  ASSERT_EQ(out.num_rows(), 21);
  std::vector<float> got_a(out.logits.begin(), out.logits.begin() + vocab());
  std::vector<float> ref_a(full_a.end() - vocab(), full_a.end());
  expect_close(got_a, ref_a, "decode row of the mixed batch");
  std::vector<float> got_b(out.logits.begin() + vocab(), out.logits.end());
  expect_close(got_b, full_b, "prefill rows of the mixed batch");
}

TEST_F(BeamInvariance, RejectsBadBatches) {
  LocalKvCache kv(model_->config(), 1, 16);
  ForwardOutput out;
  std::vector<int32_t> bad = {1, static_cast<int32_t>(vocab())};
  ForwardBatch batch;
  batch.seqs.push_back(SeqChunk{bad, 0, 0, kv.block_table(0), kv.block_table(0), true});
  auto st = model_->forward(batch, kv.layers(), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("outside the vocabulary"), std::string::npos) << st.error().message;
  std::vector<int32_t> too_long(17, 1);
  ForwardBatch batch2;
  batch2.seqs.push_back(SeqChunk{too_long, 0, 0, kv.block_table(0), kv.block_table(0), true});
  st = model_->forward(batch2, kv.layers(), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("block table"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace beam::testing
