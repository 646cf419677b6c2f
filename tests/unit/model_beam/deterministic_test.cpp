// The deterministic-inference plumbing that needs no GPU: which contexts are batch invariant
// (BatchInvariance by device), decode graphs refusing prompt rows in an invariant context (the
// prefill attention kernel computes those), and the CPU forward pass, invariant always, giving
// the same bits whatever SeqChunk::num_prompt says.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "beam_test_util.h"
#include "model/beam/decode_graphs.h"

namespace beam::testing {
namespace {

TEST(BatchInvariance, ByDeviceAndSetting) {
  EXPECT_TRUE(batch_invariant(Device::kCpu, BatchInvariance::kCpuOnly));
  EXPECT_FALSE(batch_invariant(Device::kCuda, BatchInvariance::kCpuOnly));
  EXPECT_TRUE(batch_invariant(Device::kCpu, BatchInvariance::kAlways));
  EXPECT_TRUE(batch_invariant(Device::kCuda, BatchInvariance::kAlways));
  EXPECT_FALSE(batch_invariant(Device::kCpu, BatchInvariance::kNever));
  EXPECT_FALSE(batch_invariant(Device::kCuda, BatchInvariance::kNever));
  const KernelContext ctx;  // the default: the CPU, invariant
  EXPECT_TRUE(batch_invariant(ctx));
}

// One-token steps replay decode graphs unless, in an invariant context, the token is a prompt
// token (its attention then runs on the prefill kernel, which no graph holds).
TEST(BatchInvariance, DecodeGraphsTakeNoPromptRowsWhenInvariant) {
  const std::vector<int32_t> token = {5};
  ForwardBatch batch;
  SeqChunk c{token, 0, 9, {}, {}, false};
  batch.seqs.push_back(c);
  KernelContext fast;
  fast.device = Device::kCuda;
  KernelContext invariant = fast;
  invariant.batch_invariance = BatchInvariance::kAlways;
  batch.seqs[0].num_prompt = 9;  // slot 9 is generated
  EXPECT_TRUE(DecodeGraphs::eligible(fast, batch));
  EXPECT_TRUE(DecodeGraphs::eligible(invariant, batch));
  batch.seqs[0].num_prompt = 10;  // slot 9 is the prompt's last token
  EXPECT_TRUE(DecodeGraphs::eligible(fast, batch));
  EXPECT_FALSE(DecodeGraphs::eligible(invariant, batch));
  batch.seqs[0].num_prompt = SeqChunk::kAllPrompt;  // the default
  EXPECT_FALSE(DecodeGraphs::eligible(invariant, batch));
}

// On the CPU a row's bits never depend on its kernel: num_prompt (all, half or none of the
// rows) changes nothing.
TEST(BatchInvariance, CpuLogitsIgnoreTheLengthOfThePrompt) {
  ThreadPool pool(2);
  auto weights = load_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  BeamModel model(weights, KernelContext{Device::kCpu, &pool});
  const std::vector<int32_t> tokens = random_tokens(70, weights->config.vocab_size, 3);
  std::vector<std::vector<float>> logits;
  for (int64_t num_prompt : {SeqChunk::kAllPrompt, int64_t{35}, int64_t{0}}) {
    auto kv = LocalKvCache::create(model.context(), model.config(), 1, 70);
    ASSERT_TRUE(kv.ok()) << kv.error().message;
    ForwardBatch batch;
    batch.seqs.push_back(SeqChunk{tokens, 0, 0, kv->block_table(0), kv->block_table(0), true});
    batch.seqs[0].num_prompt = num_prompt;
    ForwardOutput out;
    ASSERT_TRUE(model.forward(batch, kv->layers(), out).ok());
    logits.push_back(out.logits);
  }
  for (size_t i = 1; i < logits.size(); ++i) {
    ASSERT_EQ(logits[i].size(), logits[0].size());
    EXPECT_EQ(std::memcmp(logits[i].data(), logits[0].data(), logits[0].size() * sizeof(float)), 0)
        << "run " << i;
  }
}

}  // namespace
}  // namespace beam::testing
