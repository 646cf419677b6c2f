// Deterministic inference on the GPU (BatchInvariance::kAlways, --enable-deterministic-inference)
// on models/tiny-beam (head_dim 128: by default its prompt chunks of 64 rows and more take the
// prefill attention kernel, shorter ones and decode rows the decode kernel, M = 1 the skinny GEMV):
// a row's logits are the same bits however its sequence is chunked and whatever shares its step,
// and the engine's requests give the same tokens and logprobs alone, in a busy batch, after
// prefix-cache hits and with speculative decoding.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_model_fixture.h"

namespace beam::testing {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Equal tokens, and logprobs (chosen and top) bit for bit.
void expect_same_bits(const SiblingResult& a, const SiblingResult& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t k = 0; k < a.logprobs.size(); ++k) {
    EXPECT_EQ(std::bit_cast<uint32_t>(a.logprobs[k].chosen.logprob),
              std::bit_cast<uint32_t>(b.logprobs[k].chosen.logprob))
        << "token " << k;
    ASSERT_EQ(a.logprobs[k].top.size(), b.logprobs[k].top.size());
    for (size_t j = 0; j < a.logprobs[k].top.size(); ++j) {
      EXPECT_EQ(a.logprobs[k].top[j].token, b.logprobs[k].top[j].token);
      EXPECT_EQ(std::bit_cast<uint32_t>(a.logprobs[k].top[j].logprob),
                std::bit_cast<uint32_t>(b.logprobs[k].top[j].logprob));
    }
  }
}

// max_tokens with logprobs and `top` alternatives: greedy for even i, else sampled at
// `temperature` with seed seed0 + i.
SamplingParams alternating(size_t i, int64_t max_tokens, float temperature, uint64_t seed0,
                           int64_t top) {
  SamplingParams p = greedy(max_tokens);
  if (i % 2 == 1) {
    p.temperature = temperature;
    p.seed = seed0 + i;
  }
  p.logprobs = true;
  p.top_logprobs = top;
  return p;
}

// The deterministic engine options of these tests: a 48-token step budget.
EngineOptions deterministic_options(bool prefix_cache) {
  EngineOptions o = engine_options(Device::kCuda);
  o.batch_invariance = BatchInvariance::kAlways;
  o.max_tokens_per_step = 48;
  o.enable_prefix_cache = prefix_cache;
  return o;
}

class DeterministicCuda : public CudaModelTest {
 protected:
  void SetUp() override {
    CudaModelTest::SetUp();
    if (IsSkipped()) return;
    gpu_.batch_invariance = BatchInvariance::kAlways;
    model_ = gpu_model("tiny-beam");
    ASSERT_NE(model_, nullptr);
  }
  int64_t vocab() const { return model_->config().vocab_size; }

  // Every row's logits of the sequences `seqs` (the first num_prompt tokens of each its prompt),
  // fed together step by step: sequence i takes chunks of sizes[i] (cycled) until it is done.
  std::vector<std::vector<float>> run(const std::vector<std::vector<int32_t>>& seqs,
                                      const std::vector<int64_t>& num_prompt,
                                      const std::vector<std::vector<int64_t>>& sizes) {
    const auto count = static_cast<int64_t>(seqs.size());
    int64_t longest = 0;
    for (const auto& s : seqs) longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
    auto kv = LocalKvCache::create(gpu_, model_->config(), count, longest);
    EXPECT_TRUE(kv.ok()) << kv.error().message;
    std::vector<std::vector<float>> logits(seqs.size());
    if (!kv.ok()) return logits;
    std::vector<int64_t> done(seqs.size(), 0), step(seqs.size(), 0);
    for (;;) {
      ForwardBatch batch;
      std::vector<size_t> in_batch;
      for (size_t i = 0; i < seqs.size(); ++i) {
        const auto len = static_cast<int64_t>(seqs[i].size());
        if (done[i] == len) continue;
        const std::vector<int64_t>& cycle = sizes[i];
        const int64_t n = std::min(cycle[static_cast<size_t>(step[i]++) % cycle.size()], len - done[i]);
        SeqChunk c{std::span<const int32_t>(seqs[i]).subspan(static_cast<size_t>(done[i]),
                                                             static_cast<size_t>(n)),
                   0, done[i], kv->block_table(static_cast<int64_t>(i)),
                   kv->block_table(static_cast<int64_t>(i)), true};
        c.num_prompt = num_prompt[i];
        batch.seqs.push_back(c);
        in_batch.push_back(i);
        done[i] += n;
      }
      if (batch.seqs.empty()) return logits;
      ForwardOutput out;
      const Status st = model_->forward(batch, kv->layers(), out);
      EXPECT_TRUE(st.ok()) << st.error().message;
      if (!st.ok()) return logits;
      size_t row = 0;
      for (size_t j = 0; j < in_batch.size(); ++j) {
        const size_t rows = batch.seqs[j].tokens.size() * static_cast<size_t>(vocab());
        auto& mine = logits[in_batch[j]];
        mine.insert(mine.end(), out.logits.begin() + static_cast<std::ptrdiff_t>(row),
                    out.logits.begin() + static_cast<std::ptrdiff_t>(row + rows));
        row += rows;
      }
    }
  }

  std::unique_ptr<BeamModel> model_;
};

// 150 tokens (100 prompt, 50 generated) alone in one chunk, then in chunks of 1, 7, 64 / 36 / 1,
// 100 / 50 and mixed sizes (prompt chunks below 64 rows and generated rows in multi-row chunks,
// single-row generated steps replayed in decode graphs), and beside sequences of other lengths
// and phases: the same bits on every row.
TEST_F(DeterministicCuda, RowsKeepTheirBitsAcrossChunkingsAndBatches) {
  const std::vector<int32_t> tokens = random_tokens(150, vocab(), 11);
  const std::vector<float> want = run({tokens}, {100}, {{150}})[0];
  ASSERT_EQ(want.size(), 150 * static_cast<size_t>(vocab()));
  for (const std::vector<int64_t>& sizes :
       std::vector<std::vector<int64_t>>{{1}, {7}, {64, 36, 1}, {100, 50}, {30, 70, 1, 1, 48}}) {
    std::string label;
    for (int64_t n : sizes) label += std::to_string(n) + " ";
    EXPECT_TRUE(same_bits(run({tokens}, {100}, {sizes})[0], want)) << "chunks of " << label;
  }
  const std::vector<std::vector<int32_t>> others = {random_tokens(90, vocab(), 12),
                                                    random_tokens(5, vocab(), 13),
                                                    random_tokens(200, vocab(), 14)};
  const auto batched = run({tokens, others[0], others[1], others[2]}, {100, 90, 2, 120},
                           {{40, 1}, {90}, {1}, {64, 3}});
  EXPECT_TRUE(same_bits(batched[0], want)) << "in a batch of 4";
  // The others against themselves alone.
  for (size_t i = 0; i < others.size(); ++i) {
    const int64_t prompt = std::vector<int64_t>{90, 2, 120}[i];
    EXPECT_TRUE(same_bits(batched[i + 1], run({others[i]}, {prompt}, {{1000}})[0]))
        << "sequence " << i + 1;
  }
}

// The engine with a 48-token step budget: 8 requests of prompt lengths 1-130, greedy and sampled
// (a seed each), give each request's tokens and logprobs bit for bit as when it runs alone.
TEST_F(DeterministicCuda, EngineRequestsDoNotDependOnTheBatch) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  auto engine = Engine::create(weights, deterministic_options(false));
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  std::vector<RunRequest> reqs;
  const std::vector<int64_t> lengths = {3, 17, 70, 130, 5, 90, 1, 64};
  for (size_t i = 0; i < lengths.size(); ++i) {
    reqs.push_back(RunRequest{tokens_of(lengths[i], 50 + i, vocab()),
                              alternating(i, 24, 1.0f, 1000, 3)});
  }
  const auto together = run_all(**engine, reqs);
  ASSERT_EQ(together.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i << " (prompt " << lengths[i] << ")");
    expect_same_bits(run_all(**engine, {reqs[i]})[0][0], together[i][0]);
  }
}

// With the prefix cache, a follow-up whose prompt holds an earlier answer reuses the earlier
// prompt's blocks only (a generated token's KV holds the decode kernel's bits, a prompt's the
// prefill kernel's) and gets the tokens and logprobs of an engine that never saw the first turn.
TEST_F(DeterministicCuda, FollowUpsReuseOnlyPromptBlocks) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  auto warm = Engine::create(weights, deterministic_options(true));
  auto cold = Engine::create(weights, deterministic_options(true));
  ASSERT_TRUE(warm.ok() && cold.ok());
  const SamplingParams p = alternating(0, 40, 0.0f, 0, 3);  // greedy
  const RunRequest first{tokens_of(70, 60, vocab()), p};
  const SiblingResult answer = run_all(**warm, {first})[0][0];
  ASSERT_EQ(answer.tokens.size(), 40u);
  std::vector<int32_t> follow_up = first.prompt;
  follow_up.insert(follow_up.end(), answer.tokens.begin(), answer.tokens.end());
  const std::vector<int32_t> more = tokens_of(10, 61, vocab());
  follow_up.insert(follow_up.end(), more.begin(), more.end());
  const RunRequest second{follow_up, p};
  const SiblingResult reused = run_all(**warm, {second})[0][0];
  EXPECT_EQ(reused.usage.cached_prompt_tokens, 64);  // the first prompt's 4 whole blocks
  expect_same_bits(reused, run_all(**cold, {second})[0][0]);
}

// n-gram speculation (up to 4 drafts) changes no token and no logprob bit: verification rows are
// generated rows, on the decode kernel as plain decoding's, so even sampled requests (a seed
// each) equal their plain runs, which the default mode guarantees for greedy ones only.
TEST_F(DeterministicCuda, SpeculationChangesNoBit) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  EngineOptions o = deterministic_options(false);
  auto plain = Engine::create(weights, o);
  o.speculative.num_draft_tokens = 4;
  o.speculative.max_match = 4;
  auto spec = Engine::create(weights, o);
  ASSERT_TRUE(plain.ok() && spec.ok());
  std::vector<RunRequest> reqs;
  for (uint64_t i = 0; i < 6; ++i) {  // a motif repeated: the drafts find matches
    const std::vector<int32_t> motif = tokens_of(5 + static_cast<int64_t>(i), 70 + i, vocab());
    std::vector<int32_t> prompt;
    while (prompt.size() < 60) prompt.insert(prompt.end(), motif.begin(), motif.end());
    reqs.push_back(RunRequest{prompt, alternating(i, 32, 0.8f, 2000, 2)});
  }
  const auto want = run_all(**plain, reqs), got = run_all(**spec, reqs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    expect_same_bits(want[i][0], got[i][0]);
  }
  EXPECT_GT((*spec)->stats().spec_verifications, 0);
}

}  // namespace
}  // namespace beam::testing
