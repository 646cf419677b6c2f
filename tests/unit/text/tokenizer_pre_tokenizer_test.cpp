// Pre-tokenizer: Hugging Face's Split behaviours and the ByteLevel step.
#include "text/pre_tokenizer.h"

#include <gtest/gtest.h>

namespace beam::text {
namespace {

using Strings = std::vector<std::string>;

Strings split(std::string_view text, SplitBehavior behavior, bool invert = false, const char* literal = "-") {
  auto pattern = Pcre2Regex::from_literal(literal);
  EXPECT_TRUE(pattern.ok());
  std::vector<SplitStep> steps;
  steps.push_back({std::move(pattern).value(), behavior, invert});
  auto pre = PreTokenizer::create(std::move(steps), /*byte_level_use_regex=*/false, /*add_prefix_space=*/false);
  EXPECT_TRUE(pre.ok());
  Strings words;
  PreTokenizerScratch scratch;
  EXPECT_TRUE(pre->run(text, scratch, [&](std::string_view w) { words.emplace_back(w); }).ok());
  return words;
}

// The examples of Hugging Face's SplitDelimiterBehavior documentation.
TEST(TokenizerPreTokenizer, SplitBehaviorsMatchHuggingFaceDocs) {
  const char* text = "the-final--countdown";
  EXPECT_EQ(split(text, SplitBehavior::kRemoved), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(split(text, SplitBehavior::kIsolated), (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(text, SplitBehavior::kMergedWithPrevious), (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(text, SplitBehavior::kMergedWithNext), (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(text, SplitBehavior::kContiguous), (Strings{"the", "-", "final", "--", "countdown"}));
}

TEST(TokenizerPreTokenizer, InvertSwapsMatchesAndGaps) {
  // With invert the non-delimiters are the matches: Removed keeps only the delimiters.
  EXPECT_EQ(split("a-b--c", SplitBehavior::kRemoved, /*invert=*/true), (Strings{"-", "-", "-"}));
  EXPECT_EQ(split("a-b--c", SplitBehavior::kIsolated, /*invert=*/true), (Strings{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split("-ab", SplitBehavior::kMergedWithPrevious, /*invert=*/true), (Strings{"-ab"}));
}

TEST(TokenizerPreTokenizer, LeadingAndTrailingDelimiters) {
  EXPECT_EQ(split("-a-", SplitBehavior::kMergedWithPrevious), (Strings{"-", "a-"}));
  EXPECT_EQ(split("-a-", SplitBehavior::kMergedWithNext), (Strings{"-a", "-"}));
  EXPECT_EQ(split("---", SplitBehavior::kRemoved), Strings{});
  EXPECT_EQ(split("", SplitBehavior::kIsolated), Strings{});
}

Strings byte_level(std::string_view text, bool use_regex, bool add_prefix_space) {
  auto pre = PreTokenizer::create({}, use_regex, add_prefix_space);
  EXPECT_TRUE(pre.ok());
  Strings words;
  PreTokenizerScratch scratch;
  EXPECT_TRUE(pre->run(text, scratch, [&](std::string_view w) { words.emplace_back(w); }).ok());
  return words;
}

TEST(TokenizerPreTokenizer, ByteLevelRegexAndPrefixSpace) {
  EXPECT_EQ(byte_level("Hello  world's 12ab", true, false),
            (Strings{"Hello", " ", " world", "'s", " 12", "ab"}));
  // The prefix space is added before the GPT-2 split, so it joins the first word only.
  EXPECT_EQ(byte_level("12ab", true, true), (Strings{" 12", "ab"}));
  EXPECT_EQ(byte_level(" x", true, true), (Strings{" x"}));
  EXPECT_EQ(byte_level("a b", false, true), (Strings{" a b"}));
  EXPECT_EQ(byte_level("a b", false, false), (Strings{"a b"}));
}

}  // namespace
}  // namespace beam::text
