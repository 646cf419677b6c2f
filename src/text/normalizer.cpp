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

// Offset of the first character of valid UTF-8 `text` that `form` might change, or text.size().
size_t first_non_inert(std::string_view text, size_t from, NormalizationForm form) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = from;
  while (i < text.size()) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t next = i;
    if (!is_inert(next_code_point(text, next), form)) return i;
    i = next;
  }
  return text.size();
}

void append_utf8proc(std::string_view text, NormalizationForm form, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t len =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result,
                   static_cast<utf8proc_option_t>(utf8proc_options(form)));
  // The input is valid UTF-8, so utf8proc can only fail on memory exhaustion.
  BEAM_CHECK(len >= 0) << "utf8proc_map: " << utf8proc_errmsg(len);
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(len));
  std::free(result);
}

// Normalizes `text` into `out` chunk by chunk. Every normalization form acts on its own on the
// pieces between inert characters (an inert character neither decomposes, reorders nor
// composes with what precedes it), so only a run of non-inert characters plus the character
// before it (which it may compose with) goes through utf8proc; the rest is copied.
void normalize_runs(std::string_view text, size_t first, NormalizationForm form, std::string& out) {
  out.clear();
  out.reserve(text.size() + 16);
  size_t copied = 0;
  for (size_t i = first; i < text.size(); i = first_non_inert(text, i, form)) {
    size_t start = i;
    if (start > copied) {  // the preceding (inert) character may be the first of a composition
      start = i - 1;
      while (start > copied && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
    }
    size_t end = i;
    while (end < text.size()) {
      size_t next = end;
      if (static_cast<uint8_t>(text[end]) < 0x80 || is_inert(next_code_point(text, next), form)) break;
      end = next;
    }
    out.append(text.substr(copied, start - copied));
    append_utf8proc(text.substr(start, end - start), form, out);
    copied = end;
    i = end;
  }
  out.append(text.substr(copied));
}

}  // namespace

std::string_view Normalizer::normalize(std::string_view text, std::string& scratch) const {
  std::string_view current = text;
  std::string other;
  for (NormalizationForm form : forms_) {
    const size_t first = first_non_inert(current, 0, form);
    if (first == current.size()) continue;
    std::string& target = current.data() == scratch.data() ? other : scratch;
    normalize_runs(current, first, form, target);
    if (&target == &other) scratch.swap(other);
    current = scratch;
  }
  return current;
}

}  // namespace beam::text
