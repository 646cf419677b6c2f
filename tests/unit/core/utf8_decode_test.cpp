// core/utf8_decode.h's strict decoder: Unicode's Table 3-7 exactly.
#include "core/utf8_decode.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

namespace beam {
namespace {

// cp as UTF-8 (a Unicode scalar value).
std::string utf8(char32_t cp) {
  std::string s;
  const auto put = [&](uint32_t v) { s += static_cast<char>(v); };
  if (cp < 0x80) {
    put(cp);
  } else if (cp < 0x800) {
    put(0xC0 | (cp >> 6));
    put(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    put(0xE0 | (cp >> 12));
    put(0x80 | ((cp >> 6) & 0x3F));
    put(0x80 | (cp & 0x3F));
  } else {
    put(0xF0 | (cp >> 18));
    put(0x80 | ((cp >> 12) & 0x3F));
    put(0x80 | ((cp >> 6) & 0x3F));
    put(0x80 | (cp & 0x3F));
  }
  return s;
}

// The strict decoder takes every well-formed sequence (round trip over all code points at the
// edges of each length) and refuses overlongs, surrogates, values past U+10FFFF, stray
// continuation bytes and truncated sequences, leaving the position alone.
TEST(DecodeUtf8, TakesOnlyWellFormedSequences) {
  for (char32_t cp : {0x0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF}) {
    const std::string text = utf8(cp) + "x";
    size_t at = 0;
    EXPECT_EQ(decode_utf8(text, at), std::optional<char32_t>(cp)) << static_cast<uint32_t>(cp);
    EXPECT_EQ(at, text.size() - 1);
  }
  for (std::string_view bad :
       {"\xC0\x80", "\xC1\xBF", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xF0\x8F\xBF\xBF",
        "\xF4\x90\x80\x80", "\xF5\x9D\x83\x9E", "\xFF", "\x80", "\xE2\x82", "\xF0\x9F\x98"}) {
    size_t at = 0;
    EXPECT_EQ(decode_utf8(bad, at), std::nullopt) << testing::PrintToString(bad);
    EXPECT_EQ(at, 0u);
  }
}

}  // namespace
}  // namespace beam
