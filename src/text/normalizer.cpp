// Unicode normalization through libutf8proc.
#include "text/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "core/check.h"

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

// True if `form` leaves `text` unchanged for sure: ASCII; for NFC also every code point below
// U+0300 (all are starters that neither decompose canonically nor compose with a predecessor);
// for every form CJK unified ideographs U+4E00..U+9FFF and pictographs U+1F300..U+1FAFF, which
// have no decomposition and never combine.
bool trivially_normalized(std::string_view text, NormalizationForm form) {
  const bool latin_ok = form == NormalizationForm::kNfc;
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      ++i;
    } else if (b < 0xCC && latin_ok) {  // two-byte sequence below U+0300
      i += 2;
    } else if ((b == 0xE4 && p[i + 1] >= 0xB8) || (b >= 0xE5 && b <= 0xE9)) {  // U+4E00..U+9FFF
      i += 3;
    } else if (b == 0xF0 && p[i + 1] == 0x9F && p[i + 2] >= 0x8C && p[i + 2] <= 0xAB) {
      i += 4;  // U+1F300..U+1FAFF
    } else {
      return false;
    }
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
