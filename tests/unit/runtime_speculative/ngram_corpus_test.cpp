// NgramCorpus: drafts from earlier documents (longest suffix first, then the most recent
// occurrence), never across a document's end, the ring's eviction, and lookups against a plain
// scan of the kept documents on random text (the lossy tables may miss, never return wrong text).
#include "runtime/speculative/ngram_corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

namespace beam {
namespace {

Speculation lengths(int64_t min_match, int64_t max_match) {
  return Speculation{.num_draft_tokens = 8, .min_match = min_match, .max_match = max_match};
}

void add(NgramCorpus& c, const std::vector<int32_t>& tokens) {
  c.add(tokens);
}

std::vector<int32_t> drafts(const NgramCorpus& c, const std::vector<int32_t>& tokens,
                            int64_t k = 8) {
  std::vector<int32_t> out(static_cast<size_t>(k));
  out.resize(static_cast<size_t>(c.propose(tokens, out)));
  return out;
}

TEST(NgramCorpus, DraftsWhatFollowedTheSuffixInAnEarlierDocument) {
  NgramCorpus c(1000, lengths(1, 4));
  EXPECT_TRUE(drafts(c, {1, 2, 3}).empty());  // empty corpus
  add(c, {10, 11, 12, 1, 2, 3, 40, 41, 42});
  EXPECT_EQ(drafts(c, {7, 2, 3}), (std::vector<int32_t>{40, 41, 42}));
  EXPECT_EQ(drafts(c, {7, 2, 3}, 2), (std::vector<int32_t>{40, 41}));
  EXPECT_TRUE(drafts(c, {5, 6}).empty());  // no occurrence
  // A document's last token has nothing after it; the next document is not its continuation.
  add(c, {50, 51});
  EXPECT_TRUE(drafts(c, {42}).empty());
  EXPECT_EQ(drafts(c, {50}), (std::vector<int32_t>{51}));
  EXPECT_EQ(c.size(), 9 + 1 + 2 + 1);  // separators included
}

TEST(NgramCorpus, PrefersTheLongestSuffixThenTheMostRecentDocument) {
  NgramCorpus c(1000, lengths(1, 3));
  add(c, {5, 6, 7, 100});                                           // (5, 6, 7) -> 100
  add(c, {9, 7, 200});                                              // (7) alone -> 200, more recent
  EXPECT_EQ(drafts(c, {5, 6, 7}, 1), (std::vector<int32_t>{100}));  // 3 tokens beat 1
  EXPECT_EQ(drafts(c, {1, 6, 7}, 1), (std::vector<int32_t>{100}));  // 2 tokens beat 1
  EXPECT_EQ(drafts(c, {1, 2, 7}, 1), (std::vector<int32_t>{200}));  // the most recent 1-gram
  add(c, {5, 6, 7, 300});
  EXPECT_EQ(drafts(c, {5, 6, 7}, 1), (std::vector<int32_t>{300}));
  // min_match 2: a single shared token is no match.
  NgramCorpus two(1000, lengths(2, 3));
  add(two, {4, 8, 9});
  EXPECT_TRUE(drafts(two, {3, 8}).empty());
  EXPECT_EQ(drafts(two, {4, 8}), (std::vector<int32_t>{9}));
}

TEST(NgramCorpus, ForgetsTokensPastItsCapacity) {
  NgramCorpus c(16, lengths(1, 2));
  add(c, {1, 2, 3, 4});
  EXPECT_EQ(drafts(c, {2}), (std::vector<int32_t>{3, 4}));
  for (int32_t d = 0; d < 4; ++d) add(c, {20 + d, 30 + d, 40 + d});  // 16 more tokens
  EXPECT_TRUE(drafts(c, {2}).empty());
  EXPECT_EQ(drafts(c, {23}), (std::vector<int32_t>{33, 43}));
  // A document longer than the ring keeps its end.
  std::vector<int32_t> longer(40);
  for (int32_t i = 0; i < 40; ++i) longer[static_cast<size_t>(i)] = 100 + i;
  c.add(longer);
  EXPECT_TRUE(drafts(c, {100}).empty());
  EXPECT_EQ(drafts(c, {137}), (std::vector<int32_t>{138, 139}));
  EXPECT_EQ(c.size(), 16);
}

// Random documents over a small vocabulary against a model of the ring (the last kCapacity tokens
// added, separators included): every proposal continues an occurrence of the query's suffix of
// a length the ring holds (a token after it, within one document), up to the document's end or the
// drafts asked for; nearly always of the longest such length (the lossy tables keep each hash's
// most recent end, so a lookup falls back to a shorter length only when a collision overwrote
// it).
TEST(NgramCorpus, ProposalsContinueTheLongestOccurrenceInTheRing) {
  std::mt19937 rng(7);
  constexpr int64_t kCapacity = 3000, kMin = 1, kMax = 4, kSep = -1;
  NgramCorpus c(kCapacity, lengths(kMin, kMax));
  std::deque<int32_t> ring;
  int64_t hits = 0, misses = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<int32_t> query(1 + rng() % 6);
    for (int32_t& t : query) t = static_cast<int32_t>(rng() % 12);
    const std::vector<int32_t> got = drafts(c, query, 5);
    // Occurrences ending before ring[e] (a token, not a separator) of the query's suffix.
    auto match_at = [&](size_t e) {
      int64_t m = 0;
      while (m < kMax && m < static_cast<int64_t>(query.size()) && m < static_cast<int64_t>(e) &&
             ring[e - 1 - static_cast<size_t>(m)] ==
                 query[query.size() - 1 - static_cast<size_t>(m)])
        ++m;
      return m;
    };
    int64_t longest = 0;
    for (size_t e = 1; e < ring.size(); ++e)
      if (ring[e] != kSep) longest = std::max(longest, match_at(e));
    // The longest match among the occurrences the drafts continue (0: none).
    int64_t matched = 0;
    for (size_t e = 1; e < ring.size() && !got.empty(); ++e) {
      const int64_t m = match_at(e);
      if (ring[e] == kSep || m < kMin) continue;
      size_t n = 0;
      while (n < got.size() && e + n < ring.size() && ring[e + n] == got[n]) ++n;
      const bool ends = e + n == ring.size() || ring[e + n] == kSep;
      if (n == got.size() && (got.size() == 5 || ends)) matched = std::max(matched, m);
    }
    EXPECT_TRUE(got.empty() || matched >= kMin) << "round " << round << ": drafts of no occurrence";
    if (longest >= kMin) (matched == longest ? hits : misses) += 1;
    std::vector<int32_t> doc(5 + rng() % 60);
    for (int32_t& t : doc) t = static_cast<int32_t>(rng() % 12);
    c.add(doc);
    ring.insert(ring.end(), doc.begin(), doc.end());
    ring.push_back(kSep);
    while (static_cast<int64_t>(ring.size()) > kCapacity) ring.pop_front();
  }
  EXPECT_GT(hits, 300);
  EXPECT_LE(misses, hits / 20) << "lookups that missed the longest occurrence (collisions)";
}

}  // namespace
}  // namespace beam
