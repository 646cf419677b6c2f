// BPE merge loop: rank order, leftmost ties, long words, unknown bytes.
#include "text/bpe_model.h"

#include <gtest/gtest.h>

#include <random>

namespace beam::text {
namespace {

// Vocabulary: the 256 bytes (id = byte) plus merge results with ids from 256 in merge order.
struct Fixture {
  std::unordered_map<std::string, TokenId> vocab;
  std::vector<BpeMerge> merges;
  std::vector<std::string> text_of;

  Fixture() {
    for (int b = 0; b < 256; ++b) {
      vocab[std::string(1, static_cast<char>(b))] = b;
      text_of.emplace_back(1, static_cast<char>(b));
    }
  }
  TokenId add_merge(const std::string& a, const std::string& b) {
    const TokenId id = static_cast<TokenId>(text_of.size());
    auto [it, inserted] = vocab.emplace(a + b, id);
    if (inserted) text_of.push_back(a + b);
    merges.push_back({vocab.at(a), vocab.at(b), it->second});
    return it->second;
  }
  BpeModel model(BpeModel::Options options = {}) const {
    auto m = BpeModel::create(vocab, merges, options);
    EXPECT_TRUE(m.ok());
    return std::move(m).value();
  }
};

std::vector<TokenId> encode(const BpeModel& m, std::string_view word) {
  BpeScratch scratch;
  std::vector<TokenId> out;
  m.encode_word(word, scratch, out);
  return out;
}

TEST(TokenizerBpe, MergesByRankNotByPosition) {
  Fixture f;
  const TokenId bc = f.add_merge("b", "c");   // rank 0
  const TokenId ab = f.add_merge("a", "b");   // rank 1
  const TokenId abc = f.add_merge("a", "bc"); // rank 2
  (void)ab;
  // "abc": (b,c) has the lowest rank, so it merges first; then (a, bc).
  EXPECT_EQ(encode(f.model(), "abc"), std::vector<TokenId>{abc});
  EXPECT_EQ(encode(f.model(), "abx"), (std::vector<TokenId>{f.vocab["ab"], 'x'}));
  EXPECT_EQ(encode(f.model(), "xbc"), (std::vector<TokenId>{'x', bc}));
}

TEST(TokenizerBpe, EqualRanksMergeLeftmostFirst) {
  Fixture f;
  const TokenId aa = f.add_merge("a", "a");
  EXPECT_EQ(encode(f.model(), "aaa"), (std::vector<TokenId>{aa, 'a'}));
  EXPECT_EQ(encode(f.model(), "aaaaa"), (std::vector<TokenId>{aa, aa, 'a'}));
  const TokenId aaaa = f.add_merge("aa", "aa");
  EXPECT_EQ(encode(f.model(), "aaaaa"), (std::vector<TokenId>{aaaa, 'a'}));
}

TEST(TokenizerBpe, MergeAlgorithmsAgreeOnRandomWords) {
  std::mt19937 rng(11);
  Fixture f;
  // Random merges over a small alphabet so that long words merge deeply.
  std::vector<std::string> tokens = {"a", "b", "c", " "};
  for (int i = 0; i < 300; ++i) {
    const std::string a = tokens[rng() % tokens.size()], b = tokens[rng() % tokens.size()];
    if (a.size() + b.size() > 12 || f.vocab.count(a + b)) continue;
    f.add_merge(a, b);
    tokens.push_back(a + b);
  }
  const BpeModel m = f.model();
  EXPECT_TRUE(m.monotonic());  // every merge uses tokens created by earlier merges
  BpeScratch scratch;
  for (int trial = 0; trial < 500; ++trial) {
    std::string word;
    const size_t len = 1 + rng() % 200;
    for (size_t i = 0; i < len; ++i) word += "abc "[rng() % 4];
    m.merge_by_scan(word, scratch);
    const std::vector<TokenId> by_scan = scratch.symbols;
    m.merge_by_heap(word, scratch);
    ASSERT_EQ(by_scan, scratch.symbols) << word;
    m.merge_by_rank_groups(word, scratch);
    ASSERT_EQ(by_scan, scratch.symbols) << word;
    std::string joined;
    for (TokenId id : by_scan) joined += f.text_of[id];
    ASSERT_EQ(joined, word);
  }
}

TEST(TokenizerBpe, NonMonotonicMergesAreDetected) {
  Fixture f;
  f.vocab["ab"] = 300;
  f.vocab["abc"] = 301;
  f.merges.push_back({300, 'c', 301});  // uses "ab" before the merge that creates it
  f.merges.push_back({'a', 'b', 300});
  const BpeModel m = f.model();
  EXPECT_FALSE(m.monotonic());
  // Rank 0 needs "ab", which only rank 1 makes: the heap order still applies both.
  EXPECT_EQ(encode(m, std::string(70, 'x') + "abc"), [] {
    std::vector<TokenId> ids(70, 'x');
    ids.push_back(301);
    return ids;
  }());
}

TEST(TokenizerBpe, LongWordsStayExact) {
  Fixture f;
  f.add_merge(" ", " ");
  f.add_merge("  ", "  ");
  const std::string spaces(10001, ' ');
  const auto ids = encode(f.model(), spaces);
  ASSERT_EQ(ids.size(), 2501u);  // 2500 x "    " then " "
  EXPECT_EQ(ids.back(), ' ');
}

TEST(TokenizerBpe, UnknownBytesAreDroppedOrUnk) {
  Fixture f;
  f.vocab.erase(std::string(1, '\xFF'));
  const TokenId unk = 999;
  BpeModel::Options with_unk;
  with_unk.unk_id = unk;
  BpeModel::Options fused = with_unk;
  fused.fuse_unk = true;
  EXPECT_EQ(encode(f.model(), "a\xFF\xFF" "b"), (std::vector<TokenId>{'a', 'b'}));
  EXPECT_EQ(encode(f.model(with_unk), "a\xFF\xFF" "b"), (std::vector<TokenId>{'a', unk, unk, 'b'}));
  EXPECT_EQ(encode(f.model(fused), "a\xFF\xFF" "b"), (std::vector<TokenId>{'a', unk, 'b'}));
}

TEST(TokenizerBpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  Fixture f;
  f.add_merge("a", "b");
  f.vocab["abc"] = 500;  // reachable by no merge
  EXPECT_EQ(encode(f.model(), "abc"), (std::vector<TokenId>{f.vocab["ab"], 'c'}));
  BpeModel::Options ignore;
  ignore.ignore_merges = true;
  EXPECT_EQ(encode(f.model(ignore), "abc"), std::vector<TokenId>{500});
}

}  // namespace
}  // namespace beam::text
