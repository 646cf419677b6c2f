// Token filters (vLLM's allowed_token_ids and bad_words as SamplingParams' token lists): the mask
// keeps only the allowed ids, takes out a bad word's last token where the output ends with the
// ones before it (a one-token word always), meets a constraint's mask, and a state whose filters
// and min_tokens leave no token is a named error, never an empty row for the sampler.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/sampling/sampler.h"
#include "runtime/structured/output_constraint.h"
#include "runtime/structured/vocab_index.h"
#include "sampling_test_util.h"

namespace beam {
namespace {

using testing::make_state;
using testing::state_with_vocab;

constexpr int64_t kFilterVocab = 40;  // two mask words, the second partly past the vocabulary

// The ids the state's mask allows next (the fill must succeed).
std::vector<int32_t> allowed(const SequenceSamplingState& s) {
  std::vector<uint32_t> bits(static_cast<size_t>(allowed_mask_words(kFilterVocab)), 0xA5A5A5A5u);
  MaskScratch scratch;
  const Status st = s.fill_allowed_tokens(bits, scratch);
  EXPECT_TRUE(st.ok()) << st.error().message;
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < 64; ++t)
    if (mask_bit(bits, t)) ids.push_back(t);
  return ids;
}

std::vector<int32_t> every_token_but(std::vector<int32_t> out) {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < kFilterVocab; ++t)
    if (std::find(out.begin(), out.end(), t) == out.end()) ids.push_back(t);
  return ids;
}

TEST(TokenFilters, AllowedIdsAreTheOnlyOnesSampled) {
  SamplingParams p;
  p.allowed_token_ids = {3, 17, 33};
  SequenceSamplingState s = state_with_vocab(p, kFilterVocab);
  ASSERT_TRUE(s.constrained());
  EXPECT_EQ(allowed(s), (std::vector<int32_t>{3, 17, 33}));
  // The sampler draws among them against the logits' favourite.
  std::vector<float> logits(kFilterVocab, 0.0f);
  logits[5] = 50.0f;
  logits[17] = 1.0f;
  std::vector<uint32_t> bits(static_cast<size_t>(allowed_mask_words(kFilterVocab)));
  MaskScratch scratch;
  ASSERT_TRUE(s.fill_allowed_tokens(bits, scratch).ok());
  p.temperature = 0.0;
  SequenceSamplingState greedy = state_with_vocab(p, kFilterVocab);
  Sampler sampler(kFilterVocab);
  EXPECT_EQ(sampler.sample({logits, &greedy, {}, bits}).token, 17);
  EXPECT_FALSE(state_with_vocab(SamplingParams{}, kFilterVocab).constrained());
}

TEST(TokenFilters, BadWordsMaskTheirLastTokenAfterTheirPrefix) {
  SamplingParams p;
  p.bad_words_token_ids = {{9}, {4, 5, 6}, {7, 8}};
  SequenceSamplingState s = state_with_vocab(p, kFilterVocab);
  ASSERT_TRUE(s.constrained());
  EXPECT_EQ(allowed(s), every_token_but({9}));
  s.append_output(std::vector<int32_t>{4});
  EXPECT_EQ(allowed(s), every_token_but({9}));
  s.append_output(std::vector<int32_t>{5});
  EXPECT_EQ(allowed(s), every_token_but({9, 6}));
  s.append_output(std::vector<int32_t>{7});  // the prefix broke; [7, 8] starts
  EXPECT_EQ(allowed(s), every_token_but({9, 8}));
  s.append_output(std::vector<int32_t>{4, 5});  // several tokens in one commit
  EXPECT_EQ(allowed(s), every_token_but({9, 6}));
}

TEST(TokenFilters, FiltersMeetAConstraintsMask) {
  auto c = std::make_shared<OutputConstraint>();
  c->vocab = std::make_shared<const VocabIndex>(
      kFilterVocab, std::vector<VocabToken>{{1, "a"}, {2, "b"}, {3, "c"}, {4, "ab"}});
  auto dfa = ByteDfa::from_full_match("[ab]+");
  ASSERT_TRUE(dfa.ok());
  c->regex = *dfa;
  SamplingParams p;
  p.constraint = c;
  p.allowed_token_ids = {0, 1, 3, 30};  // 0: the eos
  p.bad_words_token_ids = {{1, 1}};
  SequenceSamplingState s = state_with_vocab(p, kFilterVocab);
  EXPECT_EQ(allowed(s), (std::vector<int32_t>{1}));
  s.append_output(std::vector<int32_t>{1});
  EXPECT_EQ(allowed(s), (std::vector<int32_t>{0}));  // "a" again is a bad word; the end fits
}

TEST(TokenFilters, FiltersMeetTheMinTokensMaskAndNameAnEmptyRow) {
  SamplingParams p;
  p.allowed_token_ids = {0, 12};  // 0 is the eos of make_state
  p.min_tokens = 2;
  SequenceSamplingState s = state_with_vocab(p, kFilterVocab);
  EXPECT_EQ(allowed(s), (std::vector<int32_t>{12}));  // eos would be -inf anyway
  s.append_output(std::vector<int32_t>{12, 12});
  EXPECT_EQ(allowed(s), (std::vector<int32_t>{0, 12}));

  p.allowed_token_ids = {0};
  SequenceSamplingState only_eos = state_with_vocab(p, kFilterVocab);
  std::vector<uint32_t> bits(static_cast<size_t>(allowed_mask_words(kFilterVocab)));
  MaskScratch scratch;
  const Status st = only_eos.fill_allowed_tokens(bits, scratch);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message,
            "no token may come next: allowed_token_ids, bad_words and min_tokens leave none");

  SamplingParams q;
  q.allowed_token_ids = {20, 21};
  q.bad_words_token_ids = {{20}, {21, 21}};
  SequenceSamplingState banned = state_with_vocab(q, kFilterVocab);
  EXPECT_EQ(allowed(banned), (std::vector<int32_t>{21}));
  banned.append_output(std::vector<int32_t>{21});
  EXPECT_FALSE(banned.fill_allowed_tokens(bits, scratch).ok());
}

TEST(TokenFilters, BadTokenListsAreNamedErrors) {
  SamplingParams p;
  p.allowed_token_ids = {3, kFilterVocab};
  Status st = p.validate(kFilterVocab);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message,
            "sampling parameter 'allowed_token_ids' holds token id 40, outside the vocabulary [0, "
            "40)");
  p.allowed_token_ids.clear();
  p.bad_words_token_ids = {{1}, {}};
  st = p.validate(kFilterVocab);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "sampling parameter 'bad_words' holds an empty word");
  p.bad_words_token_ids = {{1, -2}};
  EXPECT_FALSE(p.validate(kFilterVocab).ok());
  p.allowed_token_ids = {4, 6};
  p.bad_words_token_ids = {{6}, {5, 4}, {4}};
  st = p.validate(kFilterVocab);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message,
            "sampling parameter 'bad_words' bans every token of allowed_token_ids");
  p.bad_words_token_ids.pop_back();
  EXPECT_TRUE(p.validate(kFilterVocab).ok());
}

}  // namespace
}  // namespace beam
