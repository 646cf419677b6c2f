// Added tokens: leftmost-longest matching and the single_word / lstrip / rstrip / normalized
// flags, as Hugging Face's AddedVocabulary applies them.
#include "text/added_vocabulary.h"

#include <gtest/gtest.h>

namespace beam::text {
namespace {

struct Piece {
  std::string text;
  TokenId token;
  bool operator==(const Piece&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Piece& p) { return os << "{" << p.text << "," << p.token << "}"; }

AddedToken token(TokenId id, std::string content, bool special = true) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  t.special = special;
  return t;
}

std::vector<Piece> split(const AddedVocabulary& v, std::string_view text, bool allow_special = true,
                         AddedTokenStage stage = AddedTokenStage::kRaw) {
  std::vector<AddedSegment> segments;
  v.split(text, stage, allow_special, segments);
  std::vector<Piece> out;
  for (const auto& s : segments) out.push_back({std::string(text.substr(s.begin, s.end - s.begin)), s.token});
  return out;
}

AddedVocabulary make(std::vector<AddedToken> tokens, const Normalizer& n = Normalizer()) {
  auto v = AddedVocabulary::create(std::move(tokens), n);
  EXPECT_TRUE(v.ok());
  return std::move(v).value();
}

TEST(TokenizerAddedTokens, LeftmostLongest) {
  const auto v = make({token(1, "<a>"), token(2, "<a><b>"), token(3, "b>")});
  EXPECT_EQ(split(v, "x<a><b>y<a>b>"),
            (std::vector<Piece>{{"x", -1}, {"<a><b>", 2}, {"y", -1}, {"<a>", 1}, {"b>", 3}}));
  EXPECT_EQ(split(v, "<a"), (std::vector<Piece>{{"<a", -1}}));
  EXPECT_EQ(split(v, ""), std::vector<Piece>{});
}

TEST(TokenizerAddedTokens, SpecialTokensAsPlainText) {
  const auto v = make({token(1, "<|s|>", true), token(2, "<t>", false)});
  EXPECT_EQ(split(v, "<|s|><t>", /*allow_special=*/false), (std::vector<Piece>{{"<|s|>", -1}, {"<t>", 2}}));
  EXPECT_EQ(split(v, "<|s|><t>", /*allow_special=*/true), (std::vector<Piece>{{"<|s|>", 1}, {"<t>", 2}}));
}

TEST(TokenizerAddedTokens, SingleWordNeedsWordBoundaries) {
  AddedToken t = token(7, "ok", false);
  t.single_word = true;
  const auto v = make({t});
  EXPECT_EQ(split(v, "ok bok ok."), (std::vector<Piece>{{"ok", 7}, {" bok ", -1}, {"ok", 7}, {".", -1}}));
  EXPECT_EQ(split(v, "\xC3\xA9ok"), (std::vector<Piece>{{"\xC3\xA9ok", -1}}));
}

TEST(TokenizerAddedTokens, StripFlagsAbsorbWhitespace) {
  AddedToken l = token(1, "<L>");
  l.lstrip = true;
  AddedToken r = token(2, "<R>");
  r.rstrip = true;
  const auto v = make({l, r});
  EXPECT_EQ(split(v, "a \t<L> b"), (std::vector<Piece>{{"a", -1}, {" \t<L>", 1}, {" b", -1}}));
  EXPECT_EQ(split(v, "a <R> \xE3\x80\x80" "b"), (std::vector<Piece>{{"a ", -1}, {"<R> \xE3\x80\x80", 2}, {"b", -1}}));
  // lstrip does not reach back into the previous token.
  EXPECT_EQ(split(v, "<R> <L>"), (std::vector<Piece>{{"<R> ", 2}, {"<L>", 1}}));
}

TEST(TokenizerAddedTokens, NormalizedTokensMatchNormalizedText) {
  AddedToken t = token(5, "e\xCC\x81", false);  // e + combining acute, normalized → é
  t.normalized = true;
  const auto v = make({t}, Normalizer({NormalizationForm::kNfc}));
  EXPECT_TRUE(v.empty(AddedTokenStage::kRaw));
  EXPECT_EQ(split(v, "caf\xC3\xA9", true, AddedTokenStage::kNormalized),
            (std::vector<Piece>{{"caf", -1}, {"\xC3\xA9", 5}}));
}

TEST(TokenizerAddedTokens, WhitespaceIsUnicodeWhiteSpace) {
  for (char32_t cp : {U'\t', U'\n', U' ', U'\u0085', U'\u00A0', U'\u2028', U'\u3000'}) EXPECT_TRUE(is_unicode_whitespace(cp));
  for (char32_t cp : {U'a', U'\u200B', U'\uFEFF', U'\u001C'}) EXPECT_FALSE(is_unicode_whitespace(cp));
}

}  // namespace
}  // namespace beam::text
