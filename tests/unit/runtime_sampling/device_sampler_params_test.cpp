// The GPU sampler's host half (runtime/sampling/device_sampler.h): the sparse LogitEdits applied
// by kernels/api/sampling.h's rules give exactly apply_logit_processors' row, and the per-row
// parameters carry the CPU Sampler's uniform, temperature and filters. Runs without a GPU.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>

#include "runtime/sampling/device_sampler.h"
#include "runtime/sampling/logit_processors.h"
#include "runtime/structured/output_constraint.h"
#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::make_state;
using testing::random_softcapped_logits;
using testing::StateOptions;

// The kernel's edits (apply_logit_edit, shared with kernels/cuda/sampling.cu), on the host.
void apply_edits(std::vector<float>& row, std::span<const LogitEdit> edits,
                 const SamplingRowParams& p) {
  for (const LogitEdit& e : edits) {
    float& v = row[static_cast<size_t>(e.token)];
    v = apply_logit_edit(v, e, p);
  }
}

// Compares the edited row with apply_logit_processors' row, bit for bit.
void expect_same_processing(const SequenceSamplingState& seq, std::span<const int32_t> pending,
                            uint32_t seed) {
  const int64_t vocab = seq.vocab_size();
  std::vector<float> logits = random_softcapped_logits(vocab, seed, 4.0);
  std::vector<TokenCandidate> cpu(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) cpu[static_cast<size_t>(i)] = {logits[static_cast<size_t>(i)], static_cast<int32_t>(i)};
  apply_logit_processors(cpu, seq, pending);

  std::vector<LogitEdit> edits;
  append_logit_edits(seq, pending, edits);
  for (size_t i = 1; i < edits.size(); ++i) EXPECT_LT(edits[i - 1].token, edits[i].token);
  const SamplingRowParams p = sampling_row_params(seq, pending, 0);
  std::vector<float> gpu = logits;
  apply_edits(gpu, edits, p);
  for (int64_t i = 0; i < vocab; ++i) {
    const float a = cpu[static_cast<size_t>(i)].value, b = gpu[static_cast<size_t>(i)];
    EXPECT_EQ(std::memcmp(&a, &b, sizeof(float)), 0) << "token " << i << ": cpu " << a << " gpu " << b;
  }
}

TEST(SamplingDeviceParams, EditsMatchLogitProcessors) {
  SamplingParams p;
  p.temperature = 0.7;
  p.repetition_penalty = 1.3;
  p.frequency_penalty = 0.5;
  p.presence_penalty = -0.25;
  p.logit_bias = {{3, 2.5}, {7, -100.0}, {40, 1.0}};
  p.stop_token_ids = {5, 9};
  p.min_tokens = 6;
  StateOptions o;
  o.vocab_size = 64;
  o.prompt = {1, 2, 3, 3, 17, 40};
  o.eos = {0, 63};
  SequenceSamplingState seq = make_state(p, o);
  expect_same_processing(seq, {}, 1);
  const std::vector<int32_t> out = {2, 8, 8, 17, 30};
  seq.append_output(out);
  expect_same_processing(seq, {}, 2);
  const std::vector<int32_t> pending = {8, 31, 31};  // speculative: counts include them
  expect_same_processing(seq, pending, 3);
  seq.append_output(pending);  // now past min_tokens: no mask
  expect_same_processing(seq, {}, 4);
}

TEST(SamplingDeviceParams, EachPenaltyAlone) {
  StateOptions o;
  o.vocab_size = 32;
  o.prompt = {4, 5, 6};
  for (int which = 0; which < 4; ++which) {
    SamplingParams p;
    if (which == 0) p.repetition_penalty = 0.8;
    if (which == 1) p.frequency_penalty = -1.5;
    if (which == 2) p.presence_penalty = 2.0;
    if (which == 3) p.logit_bias = {{31, -3.0}};
    SequenceSamplingState seq = make_state(p, o);
    const std::vector<int32_t> out = {6, 7, 7};
    seq.append_output(out);
    expect_same_processing(seq, {}, 10 + static_cast<uint32_t>(which));
    std::vector<LogitEdit> edits;
    append_logit_edits(seq, {}, edits);
    const size_t want = which == 0 ? 4u : which == 3 ? 1u : 2u;  // {4,5,6,7}, {6,7}, {31}
    EXPECT_EQ(edits.size(), want) << "case " << which;
  }
}

// On the GPU, bad_words alone need no mask: their bans are kEditMask edits (merged with the
// token's other edits), and the edited row is bit for bit the CPU's masked, processed row.
TEST(SamplingDeviceParams, BadWordsAsEditsMatchTheirMask) {
  SamplingParams p;
  p.temperature = 0.7;
  p.bad_words_token_ids = {{5}, {7, 9}, {1, 2, 3}, {2, 3, 9}};
  p.logit_bias = {{5, 2.0}, {3, -1.0}};
  p.frequency_penalty = 0.5;
  StateOptions o;
  o.vocab_size = 64;
  SequenceSamplingState seq = make_state(p, o);
  EXPECT_TRUE(seq.constrained());
  EXPECT_FALSE(seq.needs_mask(true));
  const std::vector<float> logits = random_softcapped_logits(o.vocab_size, 11, 4.0);
  const std::vector<std::vector<int32_t>> outputs = {{}, {7}, {1, 2}, {3, 1}, {2, 3}};
  for (const std::vector<int32_t>& out : outputs) {
    seq.append_output(out);
    // The CPU: the mask (-inf outside it), then the processors.
    std::vector<uint32_t> bits(static_cast<size_t>(allowed_mask_words(o.vocab_size)));
    MaskScratch scratch;
    ASSERT_TRUE(seq.fill_allowed_tokens(bits, scratch).ok());
    std::vector<TokenCandidate> cpu(logits.size());
    for (size_t i = 0; i < logits.size(); ++i)
      cpu[i] = {mask_bit(bits, static_cast<int32_t>(i)) ? logits[i] : -INFINITY,
                static_cast<int32_t>(i)};
    apply_logit_processors(cpu, seq, {});
    // The GPU: the raw row and the edits with the bans.
    std::vector<LogitEdit> edits;
    append_logit_edits(seq, {}, edits, true);
    for (size_t i = 1; i < edits.size(); ++i) EXPECT_LT(edits[i - 1].token, edits[i].token);
    std::vector<float> gpu = logits;
    apply_edits(gpu, edits, sampling_row_params(seq, {}, 0));
    for (size_t i = 0; i < logits.size(); ++i)
      EXPECT_EQ(std::memcmp(&cpu[i].value, &gpu[i], sizeof(float)), 0)
          << "token " << i << " after " << out.size() << " more tokens";
  }
  // The output ends 7, 1, 2, 3, 1, 2, 3 (recent: 2, 3): bans 5 and 9; a pending 1, 2 after it
  // bans 3 (1 2 3) instead of 9 (2 3 9 needs the output's 2 3 last).
  EXPECT_EQ(seq.banned_next(), (std::vector<int32_t>{5, 9}));
  const std::vector<int32_t> pending = {1, 2};
  EXPECT_EQ(seq.banned_next(pending), (std::vector<int32_t>{3, 5}));
  std::vector<LogitEdit> edits;
  append_logit_edits(seq, pending, edits, true);
  std::vector<int32_t> masked;
  for (const LogitEdit& e : edits) {
    if (e.flags & kEditMask) masked.push_back(e.token);
    if (e.token == 3 || e.token == 5) {
      EXPECT_NE(e.flags & kEditBias, 0u) << "token " << e.token;
    }
  }
  EXPECT_EQ(masked, (std::vector<int32_t>{3, 5}));
  edits.clear();  // rows with a mask carry the bans there
  append_logit_edits(seq, pending, edits, false);
  for (const LogitEdit& e : edits) EXPECT_EQ(e.flags & kEditMask, 0u) << "token " << e.token;
  // Other filters still need the mask.
  p.allowed_token_ids = {1, 2, 3};
  EXPECT_TRUE(make_state(p, o).needs_mask(true));
}

// Bans that, with min_tokens, would leave no token are the mask's error, before any sampling.
TEST(SamplingDeviceParams, BansThatLeaveNoTokenAreAnError) {
  SamplingParams p;
  p.bad_words_token_ids = {{1}, {2}, {4}};
  p.stop_token_ids = {3};
  p.min_tokens = 2;
  StateOptions o;
  o.vocab_size = 5;
  o.eos = {0};
  SequenceSamplingState seq = make_state(p, o);
  const Status early = seq.check_bans_leave_a_token();  // 1, 2, 4 banned; 0, 3 until min_tokens
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.error().message.find("no token may come next"), std::string::npos);
  const std::vector<int32_t> pending = {3, 3};  // past min_tokens: 0 and 3 come back
  EXPECT_TRUE(seq.check_bans_leave_a_token(pending).ok());
  const std::vector<int32_t> out = {3, 3};
  seq.append_output(out);
  EXPECT_TRUE(seq.check_bans_leave_a_token().ok());
}

TEST(SamplingDeviceParams, NoEditsWithoutProcessors) {
  SequenceSamplingState seq = make_state(SamplingParams(), StateOptions());
  const std::vector<int32_t> out = {1, 1};
  seq.append_output(out);
  std::vector<LogitEdit> edits;
  append_logit_edits(seq, {}, edits);
  EXPECT_TRUE(edits.empty());
}

TEST(SamplingDeviceParams, RowParamsCarryTheCpuSamplersInputs) {
  SamplingParams p;
  p.temperature = 0.7;
  p.top_k = 5;
  p.top_p = 0.9;
  p.min_p = 0.05;
  p.logprobs = true;
  p.top_logprobs = 3;
  StateOptions o;
  o.seed = 99;
  o.sibling_index = 0;
  SequenceSamplingState seq = make_state(p, o);
  const std::vector<int32_t> out = {1, 2, 3};
  seq.append_output(out);
  const std::vector<int32_t> pending = {4};
  SamplingRowParams r = sampling_row_params(seq, pending, 7);
  EXPECT_EQ(r.uniform, seq.rng().uniform(4, RngStream::kTokenDraw));  // output index 3 + 1
  EXPECT_EQ(r.inv_temperature, static_cast<float>(1.0 / 0.7));
  EXPECT_EQ(r.logprob_temperature, 0.7);
  EXPECT_EQ(r.top_k, 5);
  EXPECT_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.min_p, 0.05);
  EXPECT_EQ(r.logits_row, 7);
  EXPECT_EQ(r.num_top_logprobs, 3);

  p = SamplingParams();
  p.temperature = 0.0;
  p.top_k = 16;  // >= vocab: off
  SequenceSamplingState greedy = make_state(p, o);
  r = sampling_row_params(greedy, {}, 0);
  EXPECT_EQ(r.inv_temperature, 0.0f);
  EXPECT_EQ(r.logprob_temperature, 1.0);
  EXPECT_EQ(r.logprob_inv_temperature, 1.0f);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_EQ(r.num_top_logprobs, -1);

  p.temperature = 1e-40;  // 1/T overflows f32: capped like the CPU's to_weights
  SequenceSamplingState tiny = make_state(p, o);
  EXPECT_EQ(sampling_row_params(tiny, {}, 0).inv_temperature, FLT_MAX);

  p.temperature = 0.7;  // raw logprobs: the draw keeps T, the logprobs take T = 1
  p.logprobs_mode = LogprobsMode::kRaw;
  SequenceSamplingState raw = make_state(p, o);
  r = sampling_row_params(raw, {}, 0);
  EXPECT_EQ(r.inv_temperature, static_cast<float>(1.0 / 0.7));
  EXPECT_EQ(r.logprob_temperature, 1.0);
  EXPECT_EQ(r.logprob_inv_temperature, 1.0f);
}

}  // namespace
}  // namespace beam
