// Oniguruma → PCRE2 translation and the Split regex matcher.
#include <gtest/gtest.h>

#include "text/pcre2_regex.h"
#include "text/regex_translate.h"

namespace beam::text {
namespace {

// The matches of `pattern` in `text` as strings.
std::vector<std::string> matches(std::string_view pattern, std::string_view text) {
  auto regex = Pcre2Regex::from_oniguruma(pattern);
  EXPECT_TRUE(regex.ok()) << (regex.ok() ? "" : regex.error().message);
  if (!regex.ok()) return {};
  RegexMatchData md;
  std::vector<ByteRange> ranges;
  EXPECT_TRUE(regex->find_all(text, md, ranges).ok());
  std::vector<std::string> out;
  for (auto [b, e] : ranges) out.emplace_back(text.substr(b, e - b));
  return out;
}

using Strings = std::vector<std::string>;

TEST(TokenizerRegex, WhitespaceIsUnicodeWhiteSpace) {
  // \s is White_Space: U+0085 (NEL) is in it, U+FEFF (BOM) and U+200B are not.
  EXPECT_EQ(matches(R"(\s+)", "a\xC2\x85\xE3\x80\x80" "b\xEF\xBB\xBF" "c\xE2\x80\x8B"), Strings{"\xC2\x85\xE3\x80\x80"});
  EXPECT_EQ(matches(R"([^\s]+)", "x\xC2\x85y"), (Strings{"x", "y"}));
  EXPECT_EQ(matches(R"(\S+)", "ab \xEF\xBB\xBF"), (Strings{"ab", "\xEF\xBB\xBF"}));
}

TEST(TokenizerRegex, InlineCaseInsensitiveFoldsAsciiOnly) {
  EXPECT_EQ(matches(R"((?i:'s|'ll))", "'S 'Ll 's"), (Strings{"'S", "'Ll", "'s"}));
  // U+017F LATIN SMALL LETTER LONG S folds to 's' in full Unicode folding; like the JS port
  // (and unlike Oniguruma) the translation folds ASCII letters only.
  EXPECT_EQ(matches(R"((?i:'s))", "'\xC5\xBF"), Strings{});
  EXPECT_EQ(matches(R"((?i:[a-c]+))", "xAbCd"), Strings{"AbC"});
}

TEST(TokenizerRegex, QuantifiersAndAnchors) {
  EXPECT_EQ(matches(R"(\p{N}{1,3})", "12345"), (Strings{"123", "45"}));
  EXPECT_EQ(matches(R"(a{,2})", "aaa"), (Strings{"aa", "a"}));
  // Oniguruma reads "{2}+" as "({2})+" (not possessive).
  EXPECT_EQ(matches(R"(a{2}+)", "aaaaa"), Strings{"aaaa"});
  EXPECT_EQ(matches(R"(.+)", "ab\ncd"), (Strings{"ab", "cd"}));
  EXPECT_EQ(matches(R"(^x)", "x\nx x"), (Strings{"x", "x"}));
  EXPECT_EQ(matches(R"(x$)", "x\nx x"), (Strings{"x", "x"}));
  EXPECT_EQ(matches(R"(\s+(?!\S)|\s+)", "a   b"), (Strings{"  ", " "}));
}

TEST(TokenizerRegex, WordClassesAndEscapes) {
  EXPECT_EQ(matches(R"(\w+)", "caf\xC3\xA9_1 x"), (Strings{"caf\xC3\xA9_1", "x"}));
  EXPECT_EQ(matches(R"(\h+)", "xx0aFg"), Strings{"0aF"});
  EXPECT_EQ(matches(R"(\bab\b)", "ab cab ab"), (Strings{"ab", "ab"}));
  EXPECT_EQ(matches(R"(\u0041)", "BAB"), Strings{"A"});
  EXPECT_EQ(matches(R"(\p{Han}+)", "ab\xE4\xB8\xAD\xE6\x96\x87"), Strings{"\xE4\xB8\xAD\xE6\x96\x87"});
}

TEST(TokenizerRegex, EmptyMatchesAreSkipped) {
  EXPECT_EQ(matches(R"(x*)", "axxb"), Strings{"xx"});
  EXPECT_EQ(matches(R"(\d*)", "\xC3\xA9" "1"), Strings{"1"});
}

TEST(TokenizerRegex, LiteralPatternsMatchTheirText) {
  auto regex = Pcre2Regex::from_literal("a.b\\E(");
  ASSERT_TRUE(regex.ok()) << regex.error().message;
  RegexMatchData md;
  std::vector<ByteRange> ranges;
  ASSERT_TRUE(regex->find_all("xa.b\\E(yaxb", md, ranges).ok());
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0], (ByteRange{1, 7}));
}

TEST(TokenizerRegex, UnsupportedConstructsAreNamed) {
  struct Case {
    const char* pattern;
    const char* mentions;
  };
  const Case cases[] = {{R"(\Gx)", "\\G"}, {R"([a[b]])", "nested character class"},
                        {R"([a-z&&[^x]])", "&&"}, {R"((?m:x))", "(?m"}, {R"((x)", "unbalanced"},
                        {R"([abc)", "unterminated"}, {R"([[:alpha:]])", "POSIX"}};
  for (const Case& c : cases) {
    auto translated = translate_oniguruma_pattern(c.pattern);
    ASSERT_FALSE(translated.ok()) << c.pattern;
    EXPECT_NE(translated.error().message.find(c.mentions), std::string::npos) << translated.error().message;
  }
  auto bad = Pcre2Regex::from_oniguruma(R"(\p{NoSuchProperty})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("PCRE2"), std::string::npos);
}

TEST(TokenizerRegex, QwenPatternSplitsLikeHuggingFace) {
  const char* qwen = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(matches(qwen, "Hello world, it's 2024!\n\n  x"),
            (Strings{"Hello", " world", ",", " it", "'s", " ", "2", "0", "2", "4", "!\n\n", " ", " x"}));
}

// Split patterns of other popular byte-level BPE tokenizers translate and behave.
TEST(TokenizerRegex, OtherModelPatternsCompile) {
  const char* llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(matches(llama3, "x 12345"), (Strings{"x", " ", "123", "45"}));
  const char* deepseek_cjk = "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+";
  EXPECT_EQ(matches(deepseek_cjk, "ab\xE4\xB8\xAD\xE3\x81\x82" "c"), Strings{"\xE4\xB8\xAD\xE3\x81\x82"});
  const char* deepseek =
      R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(matches(deepseek, "a.b [c] -d"), (Strings{"a", ".b", " [", "c", "]", " -", "d"}));
}

}  // namespace
}  // namespace beam::text
