// Regex: Python-syntax translation, partial (hold-back) matching, finditer semantics.
#include "server/parsers/pcre_regex.h"

#include <gtest/gtest.h>

namespace beam::server {
namespace {

Regex::Match search(std::string_view pattern, std::string_view subject, Regex::Mode mode,
                    size_t start = 0) {
  auto regex = Regex::compile(pattern);
  EXPECT_TRUE(regex.ok()) << (regex.ok() ? "" : regex.error().message);
  MatchScratch scratch;
  return *regex->search(subject, start, mode, true, &scratch);
}

TEST(PcreRegex, TranslatesPythonSyntax) {
  EXPECT_EQ(*translate_python_regex(R"(a\Z)"), R"(a\z)");
  EXPECT_EQ(*translate_python_regex(R"(\u00e9\U0001F642)"), R"(\x{00e9}\x{0001F642})");
  EXPECT_EQ(*translate_python_regex("x{,3}y{2,}z{,}"), "x{0,3}y{2,}z{0,}");
  EXPECT_EQ(*translate_python_regex(R"([{,3}\Z]\\Z)"), R"([{,3}\z]\\Z)");
  EXPECT_FALSE(translate_python_regex(R"(\N{BULLET})").ok());
  EXPECT_FALSE(translate_python_regex(R"(\u12)").ok());
  // Python's \Z is the absolute end; "$" still matches before a final newline.
  EXPECT_EQ(search(R"(a\Z)", "a\n", Regex::Mode::kFull).outcome, Regex::Outcome::kNone);
  EXPECT_EQ(search("a$", "a\n", Regex::Mode::kFull).outcome, Regex::Outcome::kComplete);
  EXPECT_EQ(search(R"(\u00e9{,2}!)", "\xc3\xa9\xc3\xa9!", Regex::Mode::kFull).start, 0u);
}

TEST(PcreRegex, PartialMatchesMarkWhatMustBeHeld) {
  using O = Regex::Outcome;
  EXPECT_EQ(search("<think>", "abc<thi", Regex::Mode::kPartial).outcome, O::kPartial);
  EXPECT_EQ(search("<think>", "abc<thi", Regex::Mode::kPartial).start, 3u);
  EXPECT_EQ(search("<think>", "abc<thi", Regex::Mode::kFull).outcome, O::kNone);
  EXPECT_EQ(search(R"(</t>\s*)", "x</t>", Regex::Mode::kPartial).outcome, O::kPartial);  // may grow
  EXPECT_EQ(search(R"(</t>\s*)", "x</t> y", Regex::Mode::kPartial).outcome, O::kComplete);
  EXPECT_EQ(search("END|ENDX", "hiEND", Regex::Mode::kPartial).outcome, O::kComplete);
  EXPECT_EQ(search("ENDX|END", "hiEND", Regex::Mode::kPartial).outcome, O::kPartial);
  EXPECT_EQ(search("a(?!bc)", "xab", Regex::Mode::kPartial).outcome,
            O::kPartial);  // lookahead at end
  EXPECT_EQ(search("q|a.*?z", "xa q", Regex::Mode::kPartial).start,
            1u);  // earliest live start wins
  EXPECT_EQ(search("(?:^|<think>)", "abc", Regex::Mode::kPartial, 1).start, 3u);
}

TEST(PcreRegex, NamedCapturesAndStreamStart) {
  auto regex = Regex::compile(R"(<(?P<tag>\w+)(?: name=(?P<name>\w+))?>)");
  ASSERT_TRUE(regex.ok());
  EXPECT_EQ(regex->group_names(), (std::vector<std::string>{"name", "tag"}));
  MatchScratch scratch;
  const std::string subject = "xx<call>";
  auto m = regex->search(subject, 0, Regex::Mode::kFull, true, &scratch);
  ASSERT_EQ(m->outcome, Regex::Outcome::kComplete);
  EXPECT_EQ(regex->named_captures(subject, scratch), (NamedCaptures{{"tag", "call"}}));
  auto anchored = Regex::compile("^a");
  EXPECT_EQ(anchored->search("ab", 0, Regex::Mode::kFull, true, &scratch)->outcome,
            Regex::Outcome::kComplete);
  EXPECT_EQ(anchored->search("ab", 0, Regex::Mode::kFull, false, &scratch)->outcome,
            Regex::Outcome::kNone);
  EXPECT_TRUE(Regex::compile(R"((?P<k>a)|(?P<k>b))").ok());  // Python `regex` allows repeated names
  EXPECT_FALSE(Regex::compile("(unclosed").ok());
}

TEST(PcreRegex, FindAllFollowsPythonFinditer) {
  auto regex = Regex::compile("x*");
  auto found = regex->find_all("axxb");
  ASSERT_TRUE(found.ok());
  std::vector<std::pair<size_t, size_t>> spans;
  for (const auto& m : *found) spans.emplace_back(m.start, m.end);
  EXPECT_EQ(spans, (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 3}, {3, 3}, {4, 4}}));
  auto multibyte = Regex::compile("");
  EXPECT_EQ(multibyte->find_all("日本")->size(), 3u);
  EXPECT_FALSE(Regex::compile("a")->find_all("a\xff").ok());  // invalid UTF-8 is an error here
}

TEST(PcreRegex, LiteralAlternationEscapesEverything) {
  auto regex = Regex::literal_alternation({"<|im_end|>", "a.b", std::string("n\0l", 3), "\\Q$"});
  ASSERT_TRUE(regex.ok());
  MatchScratch scratch;
  EXPECT_EQ(regex->search("x<|im_end|>", 0, Regex::Mode::kFull, true, &scratch)->start, 1u);
  EXPECT_EQ(regex->search("axb a.b", 0, Regex::Mode::kFull, true, &scratch)->start, 4u);
  EXPECT_EQ(regex->search(std::string("-n\0l", 4), 0, Regex::Mode::kFull, true, &scratch)->start,
            1u);
  EXPECT_EQ(regex->search("z\\Q$", 0, Regex::Mode::kFull, true, &scratch)->start, 1u);
}

}  // namespace
}  // namespace beam::server
