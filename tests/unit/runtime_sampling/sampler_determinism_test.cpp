// Seeded sampling is reproducible: same seed → same tokens; other seeds and siblings → other
// tokens; step grouping (pending tokens), batch composition, order and thread count change
// nothing.
#include <gtest/gtest.h>

#include <vector>

#include "core/thread_pool.h"
#include "runtime/sampling/batch_sampler.h"
#include "runtime/sampling/sampler.h"
#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::make_state;
using testing::random_softcapped_logits;
using testing::StateOptions;

constexpr int64_t kDeterminismVocab = 64;

SamplingParams flat_params() {
  SamplingParams p;
  p.temperature = 1.0;
  p.top_p = 0.95;
  p.repetition_penalty = 1.1;
  return p;
}

// Generates `num_tokens` one step at a time; logits for step i come from seed i.
std::vector<int32_t> generate(const SamplingParams& params, uint64_t seed, int64_t sibling,
                              int num_tokens) {
  StateOptions o;
  o.vocab_size = kDeterminismVocab;
  o.seed = seed;
  o.sibling_index = sibling;
  SequenceSamplingState seq = make_state(params, o);
  Sampler sampler(kDeterminismVocab);
  std::vector<int32_t> out;
  for (int i = 0; i < num_tokens; ++i) {
    std::vector<float> logits =
        random_softcapped_logits(kDeterminismVocab, static_cast<uint32_t>(i), 1.0);
    int32_t token = sampler.sample({logits, &seq}).token;
    out.push_back(token);
    seq.append_output(std::span<const int32_t>(&token, 1));
  }
  return out;
}

TEST(SamplingDeterminism, SameSeedSameTokensOtherSeedsDiffer) {
  SamplingParams p = flat_params();
  p.n = 3;
  auto a = generate(p, 7, 0, 60);
  EXPECT_EQ(a, generate(p, 7, 0, 60));
  EXPECT_NE(a, generate(p, 8, 0, 60));
  EXPECT_NE(a, generate(p, 7, 1, 60));  // siblings have their own streams
  EXPECT_NE(generate(p, 7, 1, 60), generate(p, 7, 2, 60));
  SamplingParams single = flat_params();
  EXPECT_EQ(a, generate(single, 7, 0, 60));  // sibling 0 of n = 3 is the n = 1 stream
}

TEST(SamplingDeterminism, StepGroupingDoesNotMatter) {
  // Token i sampled with tokens [0, i) pending (a speculative step) equals token i sampled after
  // committing them one by one: the RNG counter and the penalty counts see the same history.
  SamplingParams p = flat_params();
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.3;
  const int n = 12;
  std::vector<int32_t> stepwise = generate(p, 11, 0, n);
  StateOptions o;
  o.vocab_size = kDeterminismVocab;
  o.seed = 11;
  SequenceSamplingState seq = make_state(p, o);
  Sampler sampler(kDeterminismVocab);
  int committed = 0;
  for (int block : {1, 4, 3, 4}) {  // steps of several tokens
    for (int j = 0; j < block; ++j) {
      std::vector<float> logits = random_softcapped_logits(kDeterminismVocab, committed + j, 1.0);
      std::span<const int32_t> pending(stepwise.data() + committed, static_cast<size_t>(j));
      EXPECT_EQ(sampler.sample({logits, &seq, pending}).token, stepwise[committed + j]);
    }
    seq.append_output(std::span<const int32_t>(stepwise.data() + committed, block));
    committed += block;
  }
  EXPECT_EQ(committed, n);
}

TEST(SamplingDeterminism, BatchCompositionOrderAndThreadsDoNotMatter) {
  const int64_t vocab = 4096;  // 40 rows x 4096 logits: above the parallel threshold
  const int num_rows = 40;
  std::vector<SequenceSamplingState> seqs;
  std::vector<std::vector<float>> logits;
  for (int i = 0; i < num_rows; ++i) {
    SamplingParams p;
    p.temperature = i % 5 == 0 ? 0.0 : 0.5 + 0.05 * i;
    p.top_k = i % 3 == 0 ? 20 : 0;
    p.top_p = i % 4 == 0 ? 0.9 : 1.0;
    p.logprobs = i % 2 == 0;
    p.top_logprobs = i % 2 == 0 ? 3 : 0;
    StateOptions o;
    o.vocab_size = vocab;
    o.seed = 1000 + i;
    seqs.push_back(make_state(p, o));
    logits.push_back(random_softcapped_logits(vocab, 500 + i, 3.0));
  }
  auto run = [&](ThreadPool* pool, const std::vector<int>& order) {
    BatchSampler batch(vocab, pool);
    std::vector<SampleRow> rows;
    for (int i : order) rows.push_back({logits[i], &seqs[i]});
    std::vector<SampledToken> out(rows.size());
    batch.sample(rows, out);
    std::vector<SampledToken> by_seq(num_rows);
    for (size_t r = 0; r < order.size(); ++r) by_seq[order[r]] = out[r];
    return by_seq;
  };
  std::vector<int> all(num_rows), reversed(num_rows), evens;
  for (int i = 0; i < num_rows; ++i) {
    all[i] = i;
    reversed[i] = num_rows - 1 - i;
    if (i % 2 == 0) evens.push_back(i);
  }
  ThreadPool four(4);
  auto serial = run(nullptr, all);
  auto threaded = run(&four, reversed);
  auto subset = run(&four, evens);
  for (int i = 0; i < num_rows; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(threaded[i].token, serial[i].token);
    ASSERT_EQ(threaded[i].logprobs.has_value(), i % 2 == 0);
    if (i % 2 == 0) {
      EXPECT_EQ(threaded[i].logprobs->chosen.logprob, serial[i].logprobs->chosen.logprob);
      EXPECT_EQ(subset[i].token, serial[i].token);
      EXPECT_EQ(subset[i].logprobs->top.size(), 3u);
    }
    // A lone Sampler gives the same token as any batch.
    Sampler alone(vocab);
    EXPECT_EQ(alone.sample({logits[i], &seqs[i]}).token, serial[i].token);
  }
}

}  // namespace
}  // namespace beam
