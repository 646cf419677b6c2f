// PCRE2 compile and match loop.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pcre2_regex.h"

#include <pcre2.h>

#include <string>

#include "text/regex_translate.h"
#include "text/utf8.h"

namespace beam::text {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

pcre2_match_data* as_md(void* p) { return static_cast<pcre2_match_data*>(p); }
pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

}  // namespace

RegexMatchData::RegexMatchData() : data_(pcre2_match_data_create(1, nullptr)) {}
RegexMatchData::~RegexMatchData() { pcre2_match_data_free(as_md(data_)); }
RegexMatchData::RegexMatchData(RegexMatchData&& o) noexcept : data_(std::exchange(o.data_, nullptr)) {}
RegexMatchData& RegexMatchData::operator=(RegexMatchData&& o) noexcept {
  std::swap(data_, o.data_);
  return *this;
}

Pcre2Regex::Pcre2Regex(Pcre2Regex&& o) noexcept
    : code_(std::exchange(o.code_, nullptr)), jit_(o.jit_) {}
Pcre2Regex& Pcre2Regex::operator=(Pcre2Regex&& o) noexcept {
  std::swap(code_, o.code_);
  std::swap(jit_, o.jit_);
  return *this;
}
Pcre2Regex::~Pcre2Regex() { pcre2_code_free(as_code(code_)); }

Expected<Pcre2Regex> Pcre2Regex::from_oniguruma(std::string_view pattern) {
  if (!is_valid_utf8(pattern)) return make_error("regex: pattern is not valid UTF-8");
  BEAM_ASSIGN_OR_RETURN(std::string translated, translate_oniguruma_pattern(pattern));
  return compile(translated, pattern);
}

Expected<Pcre2Regex> Pcre2Regex::from_literal(std::string_view literal) {
  if (!is_valid_utf8(literal)) return make_error("regex: literal is not valid UTF-8");
  // \Q...\E quotes everything except a literal "\E", which is spliced in escaped.
  std::string quoted = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal.substr(i).starts_with("\\E")) {
      quoted += "\\E\\\\E\\Q";
      ++i;
    } else {
      quoted += literal[i];
    }
  }
  quoted += "\\E";
  return compile(quoted, literal);
}

Expected<Pcre2Regex> Pcre2Regex::compile(const std::string& pcre2_pattern, std::string_view shown) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern.data()),
                                   pcre2_pattern.size(), PCRE2_UTF | PCRE2_UCP, &error, &offset,
                                   context);
  pcre2_compile_context_free(context);
  if (!code) {
    return make_error("regex: PCRE2 rejects pattern '" + std::string(shown) + "' (as '" +
                      pcre2_pattern + "'): " + pcre2_message(error) + " at offset " +
                      std::to_string(offset));
  }
  Pcre2Regex regex;
  regex.code_ = code;
  regex.jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return regex;
}

Status Pcre2Regex::find_all(std::string_view text, RegexMatchData& md,
                            std::vector<ByteRange>& matches) const {
  matches.clear();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  pcre2_match_data* data = as_md(md.raw());
  size_t start = 0;
  while (start <= text.size()) {
    int rc = jit_ ? pcre2_jit_match(as_code(code_), subject, text.size(), start, 0, data, nullptr)
                  : PCRE2_ERROR_JIT_BADOPTION;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_JIT_BADOPTION) {
      // The interpreter keeps its backtracking state on the heap: slower, no stack limit.
      rc = pcre2_match(as_code(code_), subject, text.size(), start, PCRE2_NO_JIT | PCRE2_NO_UTF_CHECK,
                       data, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return make_error("regex: match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.emplace_back(static_cast<uint32_t>(begin), static_cast<uint32_t>(end));
      start = end;
    } else {
      if (begin >= text.size()) break;
      start = begin + utf8_sequence_length(static_cast<uint8_t>(text[begin]));
    }
  }
  return ok_status();
}

}  // namespace beam::text
