// ByteDfa::from_pattern: JSON Schema `pattern` semantics (unanchored unless '^' / '$'), the
// ECMA-262 subset, UTF-8 sequences of code point ranges, and no dead ends.
#include "runtime/structured/byte_dfa.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "runtime/structured/regex_syntax.h"
#include "runtime/structured/utf8_ranges.h"

namespace beam {
namespace {

std::shared_ptr<const ByteDfa> dfa_of(std::string_view pattern) {
  auto d = ByteDfa::from_pattern(pattern);
  EXPECT_TRUE(d.ok()) << pattern << ": " << (d.ok() ? "" : d.error().message);
  return d.ok() ? *d : nullptr;
}

std::string pattern_error(std::string_view pattern) {
  auto d = ByteDfa::from_pattern(pattern);
  return d.ok() ? "" : d.error().message;
}

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

bool in_sequences(const std::vector<Utf8Sequence>& seqs, const std::string& bytes) {
  for (const Utf8Sequence& seq : seqs) {
    if (seq.size() != bytes.size()) continue;
    bool all = true;
    for (size_t i = 0; i < seq.size() && all; ++i) {
      const auto b = static_cast<uint8_t>(bytes[i]);
      all = seq[i].lo <= b && b <= seq[i].hi;
    }
    if (all) return true;
  }
  return false;
}

// Every code point inside [lo, hi] is covered and none outside (checked around the edges and at
// random), for ranges across every encoded length.
TEST(Utf8Ranges, SequencesCoverExactlyTheRange) {
  std::mt19937 rng(1);
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0, 0x7F},          {0x41, 0x5A},      {0x7F, 0x80},       {0x85, 0x100},
      {0x80, 0x7FF},      {0x7FF, 0x800},    {0x3A9, 0x10A0},    {0xE000, 0xFFFF},
      {0x800, 0xD7FF},    {0xFFFF, 0x10000}, {0x1F600, 0x1F64F}, {0x10000, 0x10FFFF},
      {0x12345, 0x10ABCD}};
  for (auto [lo, hi] : ranges) {
    const auto seqs = utf8_sequences(lo, hi);
    std::vector<char32_t> probes = {lo, hi};
    if (lo > 0) probes.push_back(lo - 1);
    if (hi < 0x10FFFF) probes.push_back(hi + 1);
    for (int i = 0; i < 2000; ++i) probes.push_back(rng() % 0x110000);
    for (char32_t cp : probes) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      EXPECT_EQ(in_sequences(seqs, utf8(cp)), cp >= lo && cp <= hi)
          << std::hex << "U+" << static_cast<uint32_t>(cp) << " against "
          << static_cast<uint32_t>(lo) << ".." << static_cast<uint32_t>(hi);
    }
  }
}

// Ill-formed UTF-8 in a pattern is an error that says so (a lead byte past U+10FFFF once reached
// utf8_sequences' check and aborted: the grammar fuzzer's crash of 2026-12-06).
TEST(ByteDfa, RefusesIllFormedUtf8InThePattern) {
  for (std::string_view pattern : {"\xFE\xD7\x9E\xF5\x9D\x83\x9E_u00e9", "a\xF5\x9D\x83\x9E",
                                   "[\xF4\x90\x80\x80]", "\xED\xA0\x80", "x\xC0\x80"})
    EXPECT_NE(pattern_error(pattern).find("invalid UTF-8"), std::string::npos)
        << testing::PrintToString(pattern);
  EXPECT_EQ(pattern_error("\xF4\x8F\xBF\xBF|\xF0\x9F\x98\x80"), "");
}

TEST(ByteDfa, UnanchoredPatternsMatchAnywhere) {
  const auto d = dfa_of("ab+c");
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->matches("abc"));
  EXPECT_TRUE(d->matches("xxabbbcyy"));
  EXPECT_FALSE(d->matches("ac"));
  EXPECT_FALSE(d->matches(""));
  const auto start = dfa_of("^ab");
  EXPECT_TRUE(start->matches("abzz"));
  EXPECT_FALSE(start->matches("zab"));
  const auto end = dfa_of("ab$");
  EXPECT_TRUE(end->matches("zzab"));
  EXPECT_FALSE(end->matches("abz"));
  const auto both = dfa_of("^[0-9]{3}-[0-9]{4}$");
  EXPECT_TRUE(both->matches("555-1234"));
  EXPECT_FALSE(both->matches("555-12345"));
  EXPECT_FALSE(both->matches(" 555-1234"));
  // Anchors per top-level alternative.
  const auto alt = dfa_of("^a$|b");
  EXPECT_TRUE(alt->matches("a"));
  EXPECT_FALSE(alt->matches("aa"));
  EXPECT_TRUE(alt->matches("xbx"));
}

TEST(ByteDfa, EcmaSyntaxSubset) {
  struct Case {
    const char* pattern;
    std::vector<std::string> yes, no;
  };
  const std::vector<Case> cases = {
      {"^\\d+$", {"0", "123"}, {"", "1a", "\xd9\xa3"}},  // \d is ASCII only
      {"^\\w\\W\\s\\S$", {"a- x", "_\xc3\xa9\t\xe2\x82\xac"}, {"aa x", "a-xx"}},
      {"^[^a-c]$", {"d", "\xc3\xa9", "\xf0\x9f\x98\x80"}, {"a", "b", ""}},
      {"^.$", {"a", "\xe2\x82\xac"}, {"\n", "\r", "ab"}},
      {"^[\\s\\S]$", {"\n", "x"}, {""}},
      {"^(?:ab|cd){2,3}$", {"abcd", "cdcdab"}, {"ab", "abcdabcd"}},
      {"^(?<year>\\d{4})-(\\d\\d)$", {"2026-12"}, {"26-12"}},
      {"^a{2}b{1,}c{0,1}?$", {"aab", "aabbbc"}, {"ab", "aabcc"}},
      {"^\\x41\\u00e9\\u{1F600}\\uD83D\\uDE00$",
       {"A\xc3\xa9\xf0\x9f\x98\x80\xf0\x9f\x98\x80"},
       {"A"}},
      {"^[\\]\\-a]+$", {"]-a", "a"}, {"b"}},
      {"^[-a]$", {"-", "a"}, {"b"}},
      {"^\\.\\*\\+\\?\\(\\)\\[\\{\\}\\|\\^\\$\\/\\\\$", {".*+?()[{}|^$/\\"}, {"a"}},
      {"^a{,2}$", {"a{,2}"}, {"aa"}},  // not a quantifier: literal text
      {"^x{2}?$", {"xx"}, {"x", "xxx"}},
      {"^[\\b]$", {"\b"}, {"b"}},
      {"^\\t\\n\\r\\f\\v\\0$", {std::string("\t\n\r\f\v\0", 6)}, {"tnrfv0"}},
      {"^\\cJ$", {"\n"}, {"J"}},
      {"^caf\xc3\xa9$", {"caf\xc3\xa9"}, {"cafe"}},
      {"^[\xc3\xa0-\xc3\xbf]$", {"\xc3\xa9"}, {"e", "\xc4\x80"}},
      {"^()$", {""}, {"a"}},
      {"^a|b|$", {"a", "xb", "", "anything"}, {}},
      {"^[]$", {}, {}},  // an empty class: refused below (matches nothing)
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern);
    if (std::string_view(c.pattern) == "^[]$") {
      EXPECT_NE(pattern_error(c.pattern).find("matches no string"), std::string::npos);
      continue;
    }
    const auto d = dfa_of(c.pattern);
    ASSERT_NE(d, nullptr);
    for (const std::string& s : c.yes) EXPECT_TRUE(d->matches(s)) << "'" << s << "'";
    for (const std::string& s : c.no) EXPECT_FALSE(d->matches(s)) << "'" << s << "'";
  }
}

TEST(ByteDfa, RefusesWhatADfaCannotDecideNamingIt) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"(a)\\1", "backreferences"},
      {"\\k<x>", "backreferences"},
      {"a(?=b)", "lookaround"},
      {"a(?!b)", "lookaround"},
      {"(?<=a)b", "lookaround"},
      {"\\bword", "word boundaries"},
      {"\\p{L}", "Unicode property"},
      {"a^b", "'^' is only supported"},
      {"(^a)", "'^' is only supported"},
      {"a$b", "'$' is only supported"},
      {"*a", "nothing to repeat"},
      {"a**", "nothing to repeat"},
      {"a{2}{3}", "nothing to repeat"},
      {"a{3,2}", "out of order"},
      {"a{1001}", "above 1000"},
      {"[z-a]", "out of order"},
      {"(ab", "unterminated group"},
      {"ab)", "unmatched ')'"},
      {"[ab", "unterminated character class"},
      {"a\\", "ends in a backslash"},
      {"\\q", "unknown escape"},
      {"\\uD800", "surrogate"},
      {"\\u{110000}", "beyond U+10FFFF"},
      {"\\012", "octal"},
      {"(?i)a", "unknown group syntax"},
      {"[a-\\d]", "cannot end a range"},
  };
  for (const auto& [pattern, want] : cases) {
    const std::string got = pattern_error(pattern);
    EXPECT_NE(got.find(want), std::string::npos) << pattern << " -> '" << got << "'";
    EXPECT_NE(got.find("of the regular expression"), std::string::npos) << got;
  }
  EXPECT_NE(pattern_error("^(a{1000}){1000}$").find("too complex"), std::string::npos);
  EXPECT_NE(pattern_error("^[^\\s\\S]$").find("matches no string"), std::string::npos);
}

TEST(ByteDfa, FullMatchesAnchorTheWholeText) {
  auto d = ByteDfa::from_full_match("ab+c|^x$");
  ASSERT_TRUE(d.ok()) << d.error().message;
  for (const char* s : {"abc", "abbbc", "x"}) EXPECT_TRUE((*d)->matches(s)) << s;
  for (const char* s : {"zabc", "abcz", "xx", ""}) EXPECT_FALSE((*d)->matches(s)) << s;
  auto lines = ByteDfa::from_full_match("(\\w+\n){2}");
  ASSERT_TRUE(lines.ok());
  EXPECT_TRUE((*lines)->matches("ab\ncd\n"));
  EXPECT_FALSE((*lines)->matches("ab\n"));
}

// A literal list's automaton (guided_choice) is its trie: each text matches whole (the empty one
// too), a prefix only when it is a text, nothing else; multi-byte UTF-8 and every byte value
// work; its minimum code points count to the nearest text; none is an error.
TEST(ByteDfa, LiteralsMatchExactlyTheirTexts) {
  const std::vector<std::string> texts = {"yes", "no", "maybe", "may", "", "\xc3\xa9t\xc3\xa9"};
  auto dfa = ByteDfa::from_literals(texts);
  ASSERT_TRUE(dfa.ok()) << dfa.error().message;
  for (const std::string& t : texts) EXPECT_TRUE((*dfa)->matches(t)) << t;
  for (const char* t : {"ye", "maybes", "mayb", "yesno", "\xc3\xa9t", "x"})
    EXPECT_FALSE((*dfa)->matches(t)) << t;
  EXPECT_EQ((*dfa)->min_code_points((*dfa)->walk(0, "ma")), 1);    // "may"
  EXPECT_EQ((*dfa)->min_code_points((*dfa)->walk(0, "\xc3")), 2);  // the rest of "été"
  EXPECT_EQ((*dfa)->walk(0, "q"), ByteDfa::kDead);

  std::vector<std::string> every_byte;  // 256 one-byte texts: no byte is left for a dead class
  for (int b = 0; b < 256; ++b) every_byte.push_back(std::string(1, static_cast<char>(b)));
  auto bytes = ByteDfa::from_literals(every_byte);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  for (const std::string& t : every_byte) EXPECT_TRUE((*bytes)->matches(t));
  EXPECT_FALSE((*bytes)->matches("ab"));

  EXPECT_FALSE(ByteDfa::from_literals({}).ok());
}

TEST(ByteDfa, IntersectionMatchesWhatBothMatch) {
  const auto a = dfa_of("^[a-z]+\\d*$"), b = dfa_of("x");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto both = ByteDfa::intersect(*a, *b);
  ASSERT_TRUE(both.ok()) << both.error().message;
  for (const char* s : {"x", "axb12", "abx", "ab12", "x1y", "X"})
    EXPECT_EQ((*both)->matches(s), a->matches(s) && b->matches(s)) << s;
  auto none = ByteDfa::intersect(*a, *dfa_of("^\\d"));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("matches no string"), std::string::npos);
}

// Nested optional repeats make every DFA state a set of thousands of NFA states: a 20-byte
// pattern spent 27 s and 2 GB of subset construction before the state limit stopped it. The
// build's step bound refuses it, naming why; the same shape one level smaller still builds.
TEST(ByteDfa, DeterminizingWorkIsBounded) {
  auto nested = ByteDfa::from_full_match("(([a-z]?){100}){100}");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.error().message,
            "the regular expression is too complex (its automaton takes more than " +
                std::to_string(kMaxPatternBuildSteps) + " steps to build)");
  auto smaller = ByteDfa::from_full_match("(([a-z]?){30}){30}");
  ASSERT_TRUE(smaller.ok()) << smaller.error().message;
  EXPECT_EQ((*smaller)->num_states(), 901u);  // 0-900 letters: each count one state
  EXPECT_TRUE((*smaller)->matches(std::string(900, 'q')));
  EXPECT_FALSE((*smaller)->matches(std::string(901, 'q')));
  EXPECT_TRUE((*smaller)->matches(""));
}

// Automata built for one request draw from one DfaBuildBudget: each build takes its steps from
// it, and once it runs low a build fails naming the shared limit, not its own.
TEST(ByteDfa, BuildsShareABudget) {
  DfaBuildBudget budget;
  ASSERT_TRUE(ByteDfa::from_full_match("([a-z]?){1000}", &budget).ok());
  const int64_t one = kMaxSharedBuildSteps - budget.steps_left;
  EXPECT_GT(one, 1000);
  ASSERT_TRUE(ByteDfa::from_full_match("([a-z]?){1000}", &budget).ok());
  EXPECT_EQ(kMaxSharedBuildSteps - budget.steps_left, 2 * one);  // deterministic work
  const std::string spent =
      "the regular expression is too complex (the regular expressions together take more than " +
      std::to_string(kMaxSharedBuildSteps) + " steps to build)";
  budget.steps_left = one / 2;
  auto low = ByteDfa::from_full_match("([a-z]?){1000}", &budget);
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.error().message, spent);
  EXPECT_LE(budget.steps_left, 0);
  auto none = ByteDfa::from_full_match("a", &budget);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, spent);
  EXPECT_TRUE(ByteDfa::from_full_match("a").ok());  // without a budget only its own bound

  // The tables built count against its bytes.
  DfaBuildBudget bytes;
  auto first = ByteDfa::from_full_match("([a-z]?){1000}", &bytes);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(bytes.bytes_left, kMaxSharedTableBytes - static_cast<int64_t>((*first)->table_bytes()));
  bytes.bytes_left = 10;
  auto full = ByteDfa::from_full_match("([a-z]?){1000}", &bytes);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().message,
            "the regular expression is too complex (the regular expressions together pass 64 MiB "
            "of automata)");
  EXPECT_TRUE(bytes.spent());
}

// States whose closures differ only in states without byte transitions are one DFA state:
// `(a|b)*` repeated through alternations and empty groups still has one state.
TEST(ByteDfa, ClosuresThatActAlikeShareAState) {
  for (const char* pattern : {"(a|b)*", "((a|())|(b|()))*", "(()a|b())*()"}) {
    auto d = ByteDfa::from_full_match(pattern);
    ASSERT_TRUE(d.ok()) << pattern << ": " << d.error().message;
    EXPECT_EQ((*d)->num_states(), 1u) << pattern;
    EXPECT_TRUE((*d)->matches("abba")) << pattern;
    EXPECT_FALSE((*d)->matches("abc")) << pattern;
  }
}

// From every reachable state some continuation matches: walking random allowed bytes never
// reaches a state without a way out.
TEST(ByteDfa, EveryReachableStateCanStillMatch) {
  std::mt19937 rng(7);
  for (const char* pattern : {"^(a|ab)(c|bcd)(d*)$", "^[a-z]{2,4}@[a-z]+\\.(com|org)$",
                              "x[0-9]{3}y", "^(\\d+|\\w+-)+!$"}) {
    const auto d = dfa_of(pattern);
    ASSERT_NE(d, nullptr);
    // Breadth-first distances to acceptance must be finite for every state.
    const size_t n = d->num_states();
    std::vector<int> dist(n, -1);
    for (size_t s = 0; s < n; ++s)
      if (d->accepting(static_cast<int32_t>(s))) dist[s] = 0;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = 0; s < n; ++s) {
        if (dist[s] >= 0) continue;
        for (int b = 0; b < 256 && dist[s] < 0; ++b) {
          const int32_t t = d->next(static_cast<int32_t>(s), static_cast<uint8_t>(b));
          if (t != ByteDfa::kDead && dist[static_cast<size_t>(t)] >= 0) {
            dist[s] = dist[static_cast<size_t>(t)] + 1;
            changed = true;
          }
        }
      }
    }
    for (size_t s = 0; s < n; ++s) EXPECT_GE(dist[s], 0) << pattern << " state " << s;
  }
}

}  // namespace
}  // namespace beam
