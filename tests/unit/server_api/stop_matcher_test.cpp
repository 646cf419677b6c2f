// StopMatcher: every chunking of a text gives the one-shot answer, nothing past a stop is
// released, and text that could start a stop string is held back until it is decided.
#include "server/generation/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <tuple>

namespace beam::server {
namespace {

struct Streamed {
  std::string text;
  std::optional<size_t> stop;
  size_t stop_offset = 0;
};

Streamed stream(const std::string& text, const std::vector<size_t>& cuts,
                const std::vector<std::string>& stops, bool include,
                const std::vector<StopRegex>& regexes = {}) {
  StopMatcher m(stops, include, regexes);
  Streamed out;
  size_t prev = 0;
  auto feed = [&](std::string_view piece) {
    StopMatcher::Result r = m.feed(piece);
    out.text += r.released;
    if (r.stop) {
      EXPECT_FALSE(out.stop) << "a second stop was reported";
      out.stop = r.stop;
      out.stop_offset = r.stop_offset_bytes;
    }
  };
  for (size_t c : cuts) {
    feed(std::string_view(text).substr(prev, c - prev));
    prev = c;
  }
  feed(std::string_view(text).substr(prev));
  out.text += m.flush();
  return out;
}

TEST(StopMatcher, FindsStopAcrossChunks) {
  StopMatcher m({"</s>"});
  EXPECT_EQ(m.feed("hello <").released, "hello ");
  EXPECT_EQ(m.held_back_bytes(), 1u);
  EXPECT_EQ(m.feed("/").released, "");
  StopMatcher::Result r = m.feed("s> tail");
  EXPECT_EQ(r.released, "");
  ASSERT_TRUE(r.stop);
  EXPECT_EQ(*r.stop, 0u);
  EXPECT_EQ(r.stop_offset_bytes, 6u);
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.feed("more").released, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, ReleasesHeldPrefixWhenItDiverges) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.feed("abcST").released, "abc");
  EXPECT_EQ(m.feed("x").released, "STx");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.feed("ST").released, "");
  EXPECT_EQ(m.flush(), "ST");  // end of stream: no stop can complete
}

TEST(StopMatcher, IncludeStopKeepsTheStopString) {
  StopMatcher::Result r = match_stop_strings("say END now", {"END"}, /*include_stop=*/true);
  EXPECT_EQ(r.released, "say END");
  StopMatcher m({"END"}, true);
  EXPECT_EQ(m.feed("say E").released, "say ");
  EXPECT_EQ(m.feed("ND now").released, "END");
}

TEST(StopMatcher, EarliestEndingStopWins) {
  // "b" ends at 2, "abc" at 3: streaming sees "b" complete first, so the one-shot answer agrees.
  StopMatcher::Result r = match_stop_strings("xabcd", {"abc", "b"});
  ASSERT_TRUE(r.stop);
  EXPECT_EQ(*r.stop, 1u);
  EXPECT_EQ(r.released, "xa");
  // Equal ends: the longer (earlier-starting) stop wins.
  r = match_stop_strings("xabc", {"bc", "abc"});
  EXPECT_EQ(*r.stop, 1u);
  EXPECT_EQ(r.released, "x");
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.feed("abc").released, "abc");
  EXPECT_EQ(m.held_back_bytes(), 0u);
}

TEST(StopMatcher, MultiByteStopStringsNeverSplitCharacters) {
  // "é" is two bytes; the held-back part always starts at a character boundary.
  StopMatcher m({"é!"});
  StopMatcher::Result r = m.feed("café");
  EXPECT_EQ(r.released, "caf");
  r = m.feed("!x");
  ASSERT_TRUE(r.stop);
  EXPECT_EQ(r.released, "");
}

// Property: for random texts over a small alphabet (so stops overlap and repeat), every random
// chunking gives exactly the one-shot result, and the stop offset points at the stop string.
TEST(StopMatcher, AnyChunkingMatchesOneShot) {
  std::mt19937 rng(1234);
  const std::string alphabet = "abcab\n ";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    const size_t len = rng() % 40;
    for (size_t i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<std::string> stops;
    const size_t num_stops = 1 + rng() % 3;
    for (size_t s = 0; s < num_stops; ++s) {
      std::string stop;
      const size_t slen = 1 + rng() % 4;
      for (size_t i = 0; i < slen; ++i) stop += alphabet[rng() % alphabet.size()];
      stops.push_back(stop);
    }
    const bool include = rng() % 2;
    StopMatcher::Result expect = match_stop_strings(text, stops, include);
    for (int chunking = 0; chunking < 8; ++chunking) {
      std::vector<size_t> cuts;
      for (size_t i = 1; i < text.size(); ++i)
        if (rng() % 3 == 0) cuts.push_back(i);
      if (chunking == 0) {  // one byte at a time
        cuts.clear();
        for (size_t i = 1; i < text.size(); ++i) cuts.push_back(i);
      }
      Streamed got = stream(text, cuts, stops, include);
      ASSERT_EQ(got.text, expect.released) << "text=" << text << " trial " << trial;
      ASSERT_EQ(got.stop, expect.stop) << "text=" << text;
      if (got.stop) {
        ASSERT_EQ(got.stop_offset, expect.stop_offset_bytes);
        ASSERT_EQ(text.compare(got.stop_offset, stops[*got.stop].size(), stops[*got.stop]), 0);
        // Nothing after the stop string's start (or its end, with include) was released.
        ASSERT_LE(got.text.size(), got.stop_offset + (include ? stops[*got.stop].size() : 0));
      } else {
        ASSERT_EQ(got.text, text);
      }
    }
  }
}

// The stop a brute-force search finds: the first end, then the earliest start, then the lowest
// index (strings before regexes), as (index, start, end).
std::optional<std::tuple<size_t, size_t, size_t>> brute_force_stop(
    const std::string& text, const std::vector<std::string>& stops,
    const std::vector<StopRegex>& regexes) {
  for (size_t end = 1; end <= text.size(); ++end) {
    for (size_t start = 0; start < end; ++start) {
      const std::string_view piece = std::string_view(text).substr(start, end - start);
      for (size_t i = 0; i < stops.size(); ++i)
        if (piece == stops[i]) return std::make_tuple(i, start, end);
      for (size_t i = 0; i < regexes.size(); ++i)
        if (regexes[i].dfa->matches(piece)) return std::make_tuple(stops.size() + i, start, end);
    }
  }
  return std::nullopt;
}

// Property: with stop regexes beside stop strings, every chunking gives the brute-force answer,
// and text a regex may still match from is held back until it is decided.
TEST(StopMatcher, RegexesStopAtTheFirstMatchEndFromItsEarliestStart) {
  std::mt19937 rng(99);
  const std::string alphabet = "ab1 ";
  const std::vector<std::string> patterns = {"a+b",    "[0-9]{2}", "b(a|1)*b", "1",
                                             "ab|ba1", "a[ab ]*1", "(ab)+ ",   "^b a$"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const size_t len = rng() % 30;
    for (size_t i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<std::string> stops;
    for (size_t s = rng() % 2; s > 0; --s) stops.push_back(std::string(1 + rng() % 2, 'a') + "b");
    std::vector<StopRegex> regexes;
    for (size_t s = 1 + rng() % 2; s > 0; --s) {
      const std::string& p = patterns[rng() % patterns.size()];
      regexes.push_back({p, ByteDfa::from_full_match(p).value()});
    }
    const bool include = rng() % 2;
    const auto want = brute_force_stop(text, stops, regexes);
    for (int chunking = 0; chunking < 6; ++chunking) {
      std::vector<size_t> cuts;
      for (size_t i = 1; i < text.size(); ++i)
        if (chunking == 0 || rng() % 3 == 0) cuts.push_back(i);
      Streamed got = stream(text, cuts, stops, include, regexes);
      ASSERT_EQ(got.stop.has_value(), want.has_value()) << "text='" << text << "'";
      if (!want) {
        ASSERT_EQ(got.text, text);
        continue;
      }
      const auto [index, start, end] = *want;
      ASSERT_EQ(*got.stop, index) << "text='" << text << "'";
      ASSERT_EQ(got.stop_offset, start) << "text='" << text << "'";
      ASSERT_EQ(got.text, text.substr(0, include ? end : start)) << "text='" << text << "'";
    }
  }
}

TEST(StopMatcher, RegexHoldsBackOnlyWhatMayStillMatch) {
  StopMatcher m({}, false, {{"<[a-z]+>", ByteDfa::from_full_match("<[a-z]+>").value()}});
  StopMatcher::Result r = m.feed("see <ab");
  EXPECT_EQ(r.released, "see ");  // "<ab" may still become a match
  EXPECT_FALSE(r.stop);
  r = m.feed("1> ok <b");
  EXPECT_EQ(r.released, "<ab1> ok ");  // the digit ended that chance
  r = m.feed("r> tail");
  ASSERT_TRUE(r.stop);
  EXPECT_EQ(r.released, "");
  EXPECT_EQ(r.stop_offset_bytes, 13u);
  EXPECT_EQ(r.stop_end_bytes, 17u);
  EXPECT_EQ(m.flush(), "");
  // Two matches end at once in different states: the earlier start (the longer match) wins.
  StopMatcher both({}, false, {{"a|bac?", ByteDfa::from_full_match("a|bac?").value()}});
  r = both.feed("xbay");
  ASSERT_TRUE(r.stop);
  EXPECT_EQ(r.released, "x");
  EXPECT_EQ(r.stop_offset_bytes, 1u);
  EXPECT_EQ(r.stop_end_bytes, 3u);
}

}  // namespace
}  // namespace beam::server
