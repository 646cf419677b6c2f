// Reasoning budgets (SamplingParams::reasoning_budget): counting starts at the start token (or at
// once), the end tokens are forced one by one once the budget is spent (the only allowed tokens,
// whatever the logits), an early close ends the count, and bad budgets are named errors.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/sampling/sampler.h"
#include "runtime/structured/vocab_index.h"
#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::state_with_vocab;

constexpr int64_t kBudgetVocab = 40;
constexpr int32_t kOpen = 5, kNewline = 7, kClose = 8;

SamplingParams with_budget(int64_t max_tokens, std::optional<int32_t> start = kOpen) {
  SamplingParams p;
  p.temperature = 0.0;
  p.reasoning_budget = ReasoningBudget{max_tokens, {kNewline, kClose}, start};
  return p;
}

void append(SequenceSamplingState& s, std::vector<int32_t> tokens) {
  s.append_output(tokens);
}

// The one token the state's mask allows, or -1 when the mask is not a single token.
int32_t forced_token(const SequenceSamplingState& s) {
  std::vector<uint32_t> bits(static_cast<size_t>((kBudgetVocab + 31) / 32), 0xffffffffu);
  MaskScratch scratch;
  EXPECT_TRUE(s.fill_allowed_tokens(bits, scratch).ok());
  int32_t only = -1;
  for (int32_t t = 0; t < kBudgetVocab; ++t) {
    if (!mask_bit(bits, t)) continue;
    if (only >= 0) return -1;
    only = t;
  }
  return only;
}

TEST(ReasoningBudget, ForcesTheEndTokensOnceTheBudgetIsSpent) {
  SequenceSamplingState s = state_with_vocab(with_budget(3), kBudgetVocab);
  append(s, {1, 2});  // before <think>: free, not counted
  EXPECT_FALSE(s.constrained());
  append(s, {kOpen, 10, 11});
  EXPECT_FALSE(s.constrained());
  EXPECT_EQ(s.reasoning_tokens(), 2);
  append(s, {12});
  ASSERT_TRUE(s.constrained());
  EXPECT_EQ(forced_token(s), kNewline);
  // The sampler draws the forced token against the logits' choice.
  std::vector<float> logits(kBudgetVocab, 0.0f);
  logits[30] = 50.0f;
  std::vector<uint32_t> bits(2, 0u);
  MaskScratch scratch;
  ASSERT_TRUE(s.fill_allowed_tokens(bits, scratch).ok());
  Sampler sampler(kBudgetVocab);
  EXPECT_EQ(sampler.sample({logits, &s, {}, bits}).token, kNewline);
  append(s, {kNewline});
  EXPECT_EQ(forced_token(s), kClose);
  append(s, {kClose});
  EXPECT_FALSE(s.constrained());  // the answer is free
  append(s, {30, 31, 32, 33});
  EXPECT_FALSE(s.constrained());
}

TEST(ReasoningBudget, AnEarlyCloseEndsTheCount) {
  SequenceSamplingState s = state_with_vocab(with_budget(3), kBudgetVocab);
  append(s, {kOpen, 10, kClose, 11, 12, 13, 14});
  EXPECT_FALSE(s.constrained());
  EXPECT_EQ(s.reasoning_tokens(), 1);
}

TEST(ReasoningBudget, WithoutAStartTokenTheOutputStartsInTheReasoning) {
  SequenceSamplingState zero = state_with_vocab(with_budget(0, std::nullopt), kBudgetVocab);
  EXPECT_EQ(forced_token(zero), kNewline);  // the first token already ends it
  SequenceSamplingState two = state_with_vocab(with_budget(2, std::nullopt), kBudgetVocab);
  append(two, {20});
  EXPECT_FALSE(two.constrained());
  append(two, {21});
  EXPECT_EQ(forced_token(two), kNewline);
  SequenceSamplingState opened = state_with_vocab(with_budget(0), kBudgetVocab);
  append(opened, {kOpen});
  EXPECT_EQ(forced_token(opened), kNewline);
}

TEST(ReasoningBudget, BadBudgetsAreNamed) {
  SamplingParams p = with_budget(-1);
  EXPECT_NE(p.validate(kBudgetVocab).error().message.find("reasoning_budget"), std::string::npos);
  p = with_budget(4);
  p.reasoning_budget->end_tokens.clear();
  EXPECT_NE(p.validate(kBudgetVocab).error().message.find("reasoning_budget"), std::string::npos);
  p = with_budget(4, kBudgetVocab);
  EXPECT_NE(p.validate(kBudgetVocab).error().message.find("outside the vocabulary"),
            std::string::npos);
  EXPECT_TRUE(with_budget(4).validate(kBudgetVocab).ok());
}

}  // namespace
}  // namespace beam

namespace beam {
namespace {

// Under a reasoning budget the draft positions sample from copies advanced over the drafts
// (has_masks): drafts may run through the forced end when they are its tokens, and stop at the
// first position where the forced end refuses them.
TEST(ReasoningBudget, DraftsRunThroughTheForcedEndOnlyAsItsTokens) {
  const SequenceSamplingState s = state_with_vocab(with_budget(4), kBudgetVocab);
  EXPECT_TRUE(s.has_masks());
  EXPECT_FALSE(state_with_vocab(SamplingParams{}, kBudgetVocab).has_masks());
  EXPECT_EQ(s.allowed_drafts(std::vector<int32_t>{kOpen, 10, 11, 12, 13, kNewline, kClose, 9}), 8);
  EXPECT_EQ(s.allowed_drafts(std::vector<int32_t>{kOpen, 10, 11, 12, 13, 14}), 5);
  EXPECT_EQ(s.allowed_drafts(std::vector<int32_t>{kOpen, 10, 11, 12, 13, kNewline, 9}), 6);
}

// allowed_drafts: drafts stop at the first one a position's filters refuse: outside
// allowed_token_ids, banned by bad_words after the drafts before it, an end id before min_tokens,
// or anything but the forced end while a reasoning end is forced.
TEST(ReasoningBudget, AllowedDraftsStopAtTheFirstRefusedOne) {
  SamplingParams filtered;
  filtered.allowed_token_ids = {1, 2, 3, 10};
  const SequenceSamplingState allowed = state_with_vocab(filtered, kBudgetVocab);
  EXPECT_EQ(allowed.allowed_drafts(std::vector<int32_t>{1, 2, 3, 1}), 4);
  EXPECT_EQ(allowed.allowed_drafts(std::vector<int32_t>{1, 2, 7, 1}), 2);
  SamplingParams banned;
  banned.bad_words_token_ids = {{2, 3}};  // 3 right after 2
  const SequenceSamplingState bans = state_with_vocab(banned, kBudgetVocab);
  EXPECT_EQ(bans.allowed_drafts(std::vector<int32_t>{3, 1, 2, 3, 4}), 3);
  EXPECT_EQ(bans.allowed_drafts(std::vector<int32_t>{3, 1, 2, 4}), 4);
  SequenceSamplingState forcing = state_with_vocab(with_budget(2), kBudgetVocab);
  append(forcing, {kOpen, 10, 11});  // the budget is spent: the end is forced next
  EXPECT_EQ(forcing.allowed_drafts(std::vector<int32_t>{kNewline, kClose, 5}), 3);
  EXPECT_EQ(forcing.allowed_drafts(std::vector<int32_t>{kNewline, 12}), 1);
}

}  // namespace
}  // namespace beam
