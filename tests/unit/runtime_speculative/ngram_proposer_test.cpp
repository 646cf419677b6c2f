// propose_ngram_drafts: which earlier occurrence is chosen (longest suffix, then most recent),
// the lengths it matches, how many drafts it writes, and count_accepted_drafts.
#include "runtime/speculative/ngram_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace beam {
namespace {

std::vector<int32_t> drafts(const std::vector<int32_t>& tokens, int64_t k, int64_t min_match = 1,
                            int64_t max_match = 4) {
  std::vector<int32_t> out(static_cast<size_t>(k));
  const int64_t n = propose_ngram_drafts(
      tokens,
      Speculation{.num_draft_tokens = k, .min_match = min_match, .max_match = max_match}, out);
  out.resize(static_cast<size_t>(n));
  return out;
}

TEST(NgramProposer, ContinuesTheEarlierOccurrenceOfTheSuffix) {
  EXPECT_EQ(drafts({1, 2, 3, 4, 5, 9, 2, 3}, 3), (std::vector<int32_t>{4, 5, 9}));
  // The continuation may run into the suffix itself (a repeating pattern).
  EXPECT_EQ(drafts({7, 8, 7, 8, 7}, 4), (std::vector<int32_t>{8, 7}));
}

TEST(NgramProposer, PrefersTheLongestMatchThenTheMostRecent) {
  // Suffix (5, 6): 6 alone occurs at 1 and 4, but only the occurrence at 4 extends to (5, 6).
  EXPECT_EQ(drafts({6, 1, 2, 5, 6, 3, 9, 5, 6}, 2), (std::vector<int32_t>{3, 9}));
  // Two occurrences of the same length: the most recent one's continuation.
  EXPECT_EQ(drafts({4, 1, 0, 4, 2, 0, 4}, 1), (std::vector<int32_t>{2}));
  // max_match caps the comparison: both occurrences match 2 tokens, the later wins.
  EXPECT_EQ(drafts({1, 2, 3, 8, 0, 2, 3, 9, 1, 2, 3}, 1, 1, 2), (std::vector<int32_t>{9}));
  EXPECT_EQ(drafts({1, 2, 3, 8, 0, 2, 3, 9, 1, 2, 3}, 1, 1, 3), (std::vector<int32_t>{8}));
}

// The definition, one candidate at a time: the longest match (most recent among equals).
std::vector<int32_t> reference_drafts(const std::vector<int32_t>& t, int64_t k, int64_t lo,
                                      int64_t hi) {
  const auto len = static_cast<int64_t>(t.size());
  int64_t best = 0, best_end = 0;
  for (int64_t e = len - 1; e >= 1; --e) {
    int64_t m = 0;
    while (m < hi && m < e && t[e - 1 - m] == t[len - 1 - m]) ++m;
    if (m >= lo && m > best) best = m, best_end = e;
  }
  if (best == 0) return {};
  return std::vector<int32_t>(t.begin() + best_end, t.begin() + std::min(len, best_end + k));
}

// Random sequences over small vocabularies (many matches) and large ones (few, far back: the
// block skip), against the definition.
TEST(NgramProposer, MatchesTheDefinitionOnRandomSequences) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 400; ++trial) {
    const int vocab = trial % 2 ? 4 : 5000;
    std::vector<int32_t> t(1 + rng() % 300);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
    const int64_t lo = 1 + rng() % 3, hi = lo + rng() % 4, k = 1 + rng() % 6;
    EXPECT_EQ(drafts(t, k, lo, hi), reference_drafts(t, k, lo, hi)) << "trial " << trial;
  }
}

// Another text as the source (a sibling sample): its occurrence of the suffix and what follows;
// an occurrence at its very end has nothing to copy.
TEST(NgramProposer, FindsTheSuffixInAnotherText) {
  const Speculation c{.num_draft_tokens = 4, .min_match = 1, .max_match = 4};
  const std::vector<int32_t> tokens = {9, 1, 2}, sibling = {5, 1, 2, 7, 8};
  const NgramMatch m = find_ngram_match(tokens, sibling, c);
  EXPECT_EQ(m.length, 2);
  EXPECT_EQ(m.end, 3);
  std::vector<int32_t> out(4);
  out.resize(static_cast<size_t>(copy_ngram_drafts(sibling, m, out)));
  EXPECT_EQ(out, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(find_ngram_match(tokens, std::vector<int32_t>{3, 1, 2}, c).length, 0);
  EXPECT_EQ(find_ngram_match(std::vector<int32_t>{}, sibling, c).length, 0);
  // The whole sequence may match (no room is left for a suffix of itself).
  EXPECT_EQ(find_ngram_match(std::vector<int32_t>{1, 2}, sibling, c).length, 2);
}

TEST(NgramProposer, NoDraftsWithoutARecurrenceOfMinMatchTokens) {
  EXPECT_TRUE(drafts({1, 2, 3, 4}, 3).empty());
  EXPECT_TRUE(drafts({5}, 3).empty());
  EXPECT_TRUE(drafts({}, 3).empty());
  // 3 recurs, (2, 3) does not: nothing with min_match 2, a draft with 1.
  EXPECT_TRUE(drafts({3, 9, 2, 3}, 2, 2, 4).empty());
  EXPECT_EQ(drafts({3, 9, 2, 3}, 2, 1, 4), (std::vector<int32_t>{9, 2}));
  EXPECT_TRUE(drafts({1, 2, 1, 2}, 0).empty());  // no room
}

TEST(NgramProposer, AcceptsDraftsUpToTheFirstMismatch) {
  EXPECT_EQ(count_accepted_drafts(std::vector<int32_t>{}, std::vector<int32_t>{5}), 0);
  EXPECT_EQ(count_accepted_drafts(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 2, 3, 4}),
            3);
  EXPECT_EQ(count_accepted_drafts(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 7, 3, 4}),
            1);
  EXPECT_EQ(count_accepted_drafts(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{0, 2, 3, 4}),
            0);
}

TEST(NgramProposer, CooldownDoublesWithMissesInARowUpTo32Steps) {
  EXPECT_EQ(draft_cooldown_steps(0), 0);
  EXPECT_EQ(draft_cooldown_steps(1), 2);
  EXPECT_EQ(draft_cooldown_steps(2), 4);
  EXPECT_EQ(draft_cooldown_steps(5), 32);
  EXPECT_EQ(draft_cooldown_steps(40), 32);
}

TEST(NgramProposer, DraftLimitGrowsByTwoWhenAllAreAcceptedAndShrinksByOneOtherwise) {
  EXPECT_EQ(next_draft_limit(2, 2, 2, 8), 4);
  EXPECT_EQ(next_draft_limit(7, 3, 3, 8), 8);  // capped; fewer fed than allowed, all accepted
  EXPECT_EQ(next_draft_limit(4, 4, 3, 8), 3);
  EXPECT_EQ(next_draft_limit(1, 1, 0, 8), 1);  // never below one
}

TEST(NgramProposer, SettingsOutOfRangeAreNamed) {
  EXPECT_TRUE((Speculation{}).validate().ok());
  EXPECT_TRUE(
      (Speculation{.num_draft_tokens = 8, .min_match = 2, .max_match = 2}).validate().ok());
  const Status over = Speculation{.num_draft_tokens = kMaxDraftTokens + 1}.validate();
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("num_draft_tokens"), std::string::npos);
  const Status lengths =
      Speculation{.num_draft_tokens = 3, .min_match = 4, .max_match = 2}.validate();
  ASSERT_FALSE(lengths.ok());
  EXPECT_NE(lengths.error().message.find("n-gram lengths"), std::string::npos);
  const Status pool = Speculation{.dflash2_context_pool_bytes = -1}.validate();
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.error().message.find("dflash2_context_pool_bytes"), std::string::npos);
}

}  // namespace
}  // namespace beam
