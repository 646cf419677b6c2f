// UTF-8 decoding with replacement: the WHATWG algorithm (TextDecoder, fatal=false).
#include "text/utf8.h"

#include <gtest/gtest.h>

#include <random>

namespace beam::text {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(TokenizerUtf8, ValidTextIsUnchanged) {
  const std::string text = "plain ASCII, caf\xC3\xA9, \xE4\xB8\xAD\xE6\x96\x87, \xF0\x9F\x98\x80, \xEF\xBB\xBF BOM";
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(to_valid_utf8(text), text);
}

// Expected outputs follow the WHATWG decoder: one U+FFFD per maximal subpart of an invalid
// sequence (the Unicode "best practice" that TextDecoder and Python's errors="replace" share).
TEST(TokenizerUtf8, ReplacesMaximalInvalidSubparts) {
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"\x80", kFffd},                                   // lone continuation byte
      {"a\xBF" "b", "a" + kFffd + "b"},
      {"\xC0\x80", kFffd + kFffd},                       // overlong NUL: C0 is never valid
      {"\xE0\x80\x80", kFffd + kFffd + kFffd},           // overlong: E0 needs A0..BF next
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},           // surrogate U+D800
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // above U+10FFFF
      {"\xF5", kFffd},
      {"\xFF\xFE", kFffd + kFffd},
      {"\xE4\xB8", kFffd},                               // truncated 3-byte sequence at the end
      {"\xE4\xB8" "x", kFffd + "x"},                     // truncated, then ASCII
      {"\xF0\x9F\x98", kFffd},                           // truncated emoji
      {"\xF0\x9F\x98\xF0\x9F\x98\x80", kFffd + "\xF0\x9F\x98\x80"},
      {"\xE2\x82\x28", kFffd + "("},
      {"\xC3", kFffd},
      {"\xC3\xC3\xA9", kFffd + "\xC3\xA9"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(is_valid_utf8(c.in)) << ::testing::PrintToString(c.in);
    EXPECT_EQ(to_valid_utf8(c.in), c.out) << ::testing::PrintToString(c.in);
  }
}

TEST(TokenizerUtf8, StreamingEqualsOneShotForEverySplit) {
  std::mt19937 rng(7);
  const std::string pieces[] = {"a", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\x80", "\xED\xA0\x80",
                                "\xE4\xB8", "\xF5", "\xC0\xAF", " "};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    for (int i = 0; i < 12; ++i) text += pieces[rng() % std::size(pieces)];
    const std::string expected = to_valid_utf8(text);
    EXPECT_TRUE(is_valid_utf8(expected));
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      Utf8Decoder decoder;
      std::string out;
      decoder.feed(std::string_view(text).substr(0, cut), out);
      decoder.feed(std::string_view(text).substr(cut), out);
      decoder.flush(out);
      ASSERT_EQ(out, expected) << "cut " << cut;
    }
  }
}

TEST(TokenizerUtf8, DecoderHoldsOnlyIncompleteCharacters) {
  Utf8Decoder decoder;
  std::string out;
  decoder.feed("ab\xE4\xB8", out);
  EXPECT_EQ(out, "ab");
  EXPECT_TRUE(decoder.holding());
  decoder.feed("\xAD", out);
  EXPECT_EQ(out, "ab\xE4\xB8\xAD");
  EXPECT_FALSE(decoder.holding());
}

TEST(TokenizerUtf8, ValidatorAgreesWithDecoderOnAllTwoByteInputs) {
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      const std::string s{static_cast<char>(a), static_cast<char>(b)};
      ASSERT_EQ(is_valid_utf8(s), to_valid_utf8(s) == s && s.find(kFffd) == std::string::npos)
          << a << " " << b;
    }
  }
}

TEST(TokenizerUtf8, NonScalarValuesEncodeAsReplacement) {
  for (char32_t cp : {char32_t{0xD800}, char32_t{0xDBFF}, char32_t{0xDC00}, char32_t{0xDFFF},
                      char32_t{0x110000}, char32_t{0xFFFFFFFF}}) {
    std::string s;
    append_utf8(s, cp);
    EXPECT_EQ(s, "\xEF\xBF\xBD") << std::hex << static_cast<uint32_t>(cp);
  }
}

TEST(TokenizerUtf8, CodePointsRoundTrip) {
  for (char32_t cp : {U'\0', U'A', U'\u00E9', U'\u07FF', U'\u0800', U'\uFFFD', U'\U00010000', U'\U0010FFFF'}) {
    std::string s;
    append_utf8(s, cp);
    EXPECT_TRUE(is_valid_utf8(s));
    size_t pos = 0;
    EXPECT_EQ(next_code_point(s, pos), cp);
    EXPECT_EQ(pos, s.size());
  }
}

}  // namespace
}  // namespace beam::text
