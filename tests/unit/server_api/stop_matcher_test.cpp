// StopMatcher: every chunking of a text gives the one-shot answer, nothing past a stop is
// released, and text that could start a stop string is held back until it is decided.
#include <gtest/gtest.h>

#include <random>

#include "server/generation/stop_matcher.h"

namespace beam::server {
namespace {

struct Streamed {
  std::string text;
  std::optional<size_t> stop;
  size_t stop_offset = 0;
};

Streamed stream(const std::string& text, const std::vector<size_t>& cuts, const std::vector<std::string>& stops,
                bool include) {
  StopMatcher m(stops, include);
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

}  // namespace
}  // namespace beam::server
