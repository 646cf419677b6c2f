// Unicode normalizer: the fast path (text left alone) must agree with utf8proc everywhere.
#include "text/normalizer.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>

#include "text/utf8.h"

namespace beam::text {
namespace {

std::string reference(std::string_view text, int options) {
  utf8proc_uint8_t* out = nullptr;
  const auto len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                static_cast<utf8proc_ssize_t>(text.size()), &out,
                                static_cast<utf8proc_option_t>(options));
  EXPECT_GE(len, 0);
  std::string s(reinterpret_cast<const char*>(out), static_cast<size_t>(len));
  std::free(out);
  return s;
}

struct Form {
  NormalizationForm form;
  int options;
};
const Form kForms[] = {
    {NormalizationForm::kNfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE},
    {NormalizationForm::kNfd, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE},
    {NormalizationForm::kNfkc, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
    {NormalizationForm::kNfkd, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT},
};

std::string utf8(std::initializer_list<char32_t> cps) {
  std::string s;
  for (char32_t cp : cps) append_utf8(s, cp);
  return s;
}

TEST(TokenizerNormalizer, KnownCases) {
  std::string scratch;
  const Normalizer nfc({NormalizationForm::kNfc});
  EXPECT_EQ(nfc.normalize(utf8({U'e', 0x301}), scratch), utf8({0xE9}));
  EXPECT_EQ(nfc.normalize(utf8({0x1100, 0x1161, 0x11A8}), scratch), utf8({0xAC01}));  // jamo → 각
  EXPECT_EQ(nfc.normalize(utf8({0x2126}), scratch), utf8({0x3A9}));                  // Ohm sign → Omega
  EXPECT_EQ(nfc.normalize("plain ascii", scratch), "plain ascii");
  const Normalizer nfkc({NormalizationForm::kNfkc});
  EXPECT_EQ(nfkc.normalize(utf8({0xFB01, 0xA0}), scratch), "fi ");
  const Normalizer none;
  EXPECT_TRUE(none.is_identity());
  EXPECT_EQ(none.normalize(utf8({U'e', 0x301}), scratch), utf8({U'e', 0x301}));
  const Normalizer seq({NormalizationForm::kNfd, NormalizationForm::kNfc});
  EXPECT_EQ(seq.normalize(utf8({0xE9}), scratch), utf8({0xE9}));
}

// Every code point alone, after 'a' and before U+0301: the normalizer equals utf8proc.
TEST(TokenizerNormalizer, AgreesWithUtf8procOnEveryCodePoint) {
  std::string scratch;
  for (const Form& f : kForms) {
    const Normalizer n({f.form});
    for (char32_t cp = 0; cp < 0x30000; ++cp) {
      if (cp >= 0xD800 && cp < 0xE000) continue;
      for (const std::string& s : {utf8({cp}), utf8({U'a', cp}), utf8({cp, 0x301})}) {
        ASSERT_EQ(n.normalize(s, scratch), reference(s, f.options)) << std::hex << static_cast<uint32_t>(cp);
      }
    }
  }
}

// Every canonical composition pair (first, second) must be composed, which requires the fast
// path to never treat a second character as inert.
TEST(TokenizerNormalizer, ComposesEveryCanonicalPair) {
  std::string scratch;
  const Normalizer nfc({NormalizationForm::kNfc});
  int pairs = 0;
  for (char32_t cp = 0xC0; cp < 0x30000; ++cp) {
    utf8proc_int32_t buf[8];
    int last = 0;
    const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 8, UTF8PROC_DECOMPOSE, &last);
    if (n < 2 || n > 8) continue;
    std::string decomposed;
    for (int i = 0; i < n; ++i) append_utf8(decomposed, static_cast<char32_t>(buf[i]));
    ASSERT_EQ(nfc.normalize(decomposed, scratch), reference(decomposed, UTF8PROC_STABLE | UTF8PROC_COMPOSE))
        << std::hex << static_cast<uint32_t>(cp);
    ++pairs;
  }
  EXPECT_GT(pairs, 2000);
}

// Mixed text: only the runs around non-inert characters go through utf8proc; the result must
// equal normalizing the whole text at once.
TEST(TokenizerNormalizer, RunByRunEqualsWholeText) {
  const char32_t pool[] = {U'a', U'e', U' ', U'\u00E9', U'\u00C5', U'\u0301', U'\u0323', U'\u0308', U'\u1100',
                           U'\u1161', U'\u11A8', U'\uAC00', U'\u4E2D', U'\u3099', U'\u304B', U'\u03AC',
                           U'\u1EA0', U'\uFB01', U'\u2126', U'\u0B47', U'\u0B3E', U'\U0001F600', U'\u00A0'};
  std::mt19937 rng(17);
  std::string scratch;
  for (const Form& f : kForms) {
    const Normalizer n({f.form});
    for (int trial = 0; trial < 3000; ++trial) {
      std::string text;
      const int len = 1 + static_cast<int>(rng() % 24);
      for (int i = 0; i < len; ++i) append_utf8(text, pool[rng() % std::size(pool)]);
      ASSERT_EQ(n.normalize(text, scratch), reference(text, f.options)) << ::testing::PrintToString(text);
    }
  }
}

}  // namespace
}  // namespace beam::text
