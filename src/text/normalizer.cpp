// Unicode normalization through libutf8proc.
#include "text/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "core/check.h"
#include "text/utf8.h"

namespace beam::text {

namespace {

int utf8proc_options(NormalizationForm form) {
  switch (form) {
    case NormalizationForm::kNfc: return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case NormalizationForm::kNfd: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case NormalizationForm::kNfkc: return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case NormalizationForm::kNfkd: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  }
  return 0;
}

bool is_hangul_jamo(char32_t cp) {
  return (cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0xA960 && cp <= 0xA97F) || (cp >= 0xD7B0 && cp <= 0xD7FF);
}

// True if `cp` can be left alone by `form` whatever surrounds it: it does not decompose, has
// combining class 0, and never composes with a preceding character. Below U+0300 everything is
// NFC-stable (precomposed Latin letters compose nothing further unless a mark follows, and a mark
// is not inert itself). Checked exhaustively against utf8proc in the normalizer test.
bool is_inert(char32_t cp, NormalizationForm form) {
  if (cp < 0x80) return true;
  if (form == NormalizationForm::kNfc && cp < 0x300) return true;
  if (is_hangul_jamo(cp)) return false;
  if (cp >= 0xAC00 && cp <= 0xD7A3) {  // Hangul syllables decompose algorithmically
    return form == NormalizationForm::kNfc || form == NormalizationForm::kNfkc;
  }
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  // comb_index >= 0x8000 (and not UINT16_MAX) marks the second character of a composition pair.
  const bool composes_with_previous = p->comb_index != UINT16_MAX && p->comb_index >= 0x8000;
  return p->combining_class == 0 && p->decomp_seqindex == UINT16_MAX && !composes_with_previous;
}

bool trivially_normalized(std::string_view text, NormalizationForm form) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    if (!is_inert(next_code_point(text, i), form)) return false;
  }
  return true;
}

}  // namespace

std::string_view Normalizer::normalize(std::string_view text, std::string& scratch) const {
  std::string_view current = text;
  for (NormalizationForm form : forms_) {
    if (trivially_normalized(current, form)) continue;
    utf8proc_uint8_t* result = nullptr;
    const utf8proc_ssize_t len =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                     static_cast<utf8proc_ssize_t>(current.size()), &result,
                     static_cast<utf8proc_option_t>(utf8proc_options(form)));
    // The input is valid UTF-8, so utf8proc can only fail on memory exhaustion.
    BEAM_CHECK(len >= 0) << "utf8proc_map: " << utf8proc_errmsg(len);
    scratch.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(len));
    std::free(result);
    current = scratch;
  }
  return current;
}

}  // namespace beam::text
