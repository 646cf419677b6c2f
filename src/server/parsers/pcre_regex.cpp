// PCRE2-backed Regex with Python-syntax translation (see pcre_regex.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "server/parsers/pcre_regex.h"

#include <pcre2.h>

#include <algorithm>
#include <cstring>

namespace beam::server {
namespace {

constexpr uint32_t kCompileOptions = PCRE2_UTF | PCRE2_UCP | PCRE2_DOTALL | PCRE2_DUPNAMES;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  if (n < 0) return "PCRE2 error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

PCRE2_SPTR subject_ptr(std::string_view subject) {
  static constexpr char kEmpty[] = "";
  return reinterpret_cast<PCRE2_SPTR>(subject.data() != nullptr ? subject.data() : kEmpty);
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Python's `{,n}` / `{,}` (minimum omitted) → PCRE2 `{0,n}`; returns chars consumed or 0.
size_t translate_open_minimum(std::string_view p, size_t i, std::string* out) {
  if (i + 1 >= p.size() || p[i + 1] != ',') return 0;
  size_t j = i + 2;
  while (j < p.size() && p[j] >= '0' && p[j] <= '9') ++j;
  if (j >= p.size() || p[j] != '}') return 0;
  *out += "{0,";
  out->append(p.substr(i + 2, j - (i + 2)));
  *out += '}';
  return j - i + 1;
}

}  // namespace

struct MatchScratch::Impl {
  pcre2_match_data* data = nullptr;
  uint32_t pairs = 0;
  ~Impl() {
    if (data != nullptr) pcre2_match_data_free(data);
  }
  void reserve(uint32_t needed_pairs) {
    if (pairs >= needed_pairs) return;
    if (data != nullptr) pcre2_match_data_free(data);
    pairs = std::max<uint32_t>(needed_pairs, 16);
    data = pcre2_match_data_create(pairs, nullptr);
  }
};

MatchScratch::MatchScratch() : impl_(std::make_unique<Impl>()) {}
MatchScratch::~MatchScratch() = default;
MatchScratch::MatchScratch(MatchScratch&&) noexcept = default;
MatchScratch& MatchScratch::operator=(MatchScratch&&) noexcept = default;

struct Regex::Code {
  pcre2_code* code = nullptr;
  uint32_t capture_count = 0;
  uint32_t max_lookbehind = 0;
  std::vector<std::pair<uint32_t, std::string>> names;  // (group number, name), number order
  ~Code() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

Regex::Regex(std::shared_ptr<const Code> code, std::string pattern, bool depends_on_search_start)
    : code_(std::move(code)),
      pattern_(std::move(pattern)),
      depends_on_search_start_(depends_on_search_start) {}
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Expected<std::string> translate_python_regex(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 8);
  bool in_class = false;
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 'Z') {
        out += "\\z";  // Python \Z is the absolute end (PCRE2 \z), not "before a final newline"
        i += 2;
      } else if (e == 'u' || e == 'U') {
        const size_t digits = e == 'u' ? 4 : 8;
        if (i + 2 + digits > p.size() ||
            !std::all_of(p.begin() + i + 2, p.begin() + i + 2 + digits, is_hex)) {
          return make_error("bad escape \\" + std::string(1, e) + " at position " +
                            std::to_string(i) + " in pattern " + std::string(p));
        }
        out += "\\x{";
        out.append(p.substr(i + 2, digits));
        out += '}';
        i += 2 + digits;
      } else if (e == 'N') {
        return make_error("named character escapes (\\N{...}) are not supported, in pattern " +
                          std::string(p));
      } else {
        out += c;
        out += e;
        i += 2;
      }
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      // A ']' right after '[' or '[^' is a literal member, as in Python.
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += p[i++];
      continue;
    }
    if (c == '{') {
      const size_t consumed = translate_open_minimum(p, i, &out);
      if (consumed > 0) {
        i += consumed;
        continue;
      }
    }
    out += c;
    ++i;
  }
  return out;
}

std::string escape_regex_literal(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool plain =
        byte >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (plain) {
      out += c;
    } else if (byte == 0) {
      out += "\\x{0}";
    } else {
      out += '\\';
      out += c;
    }
  }
  return out;
}

namespace {

Expected<std::shared_ptr<Regex::Code>> compile_code(const std::string& translated,
                                                    std::string_view shown) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    kCompileOptions, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    return make_error(pcre2_message(error_code) + " at offset " + std::to_string(error_offset) +
                      " in pattern " + std::string(shown));
  }
  auto compiled = std::make_shared<Regex::Code>();
  compiled->code = code;
  pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &compiled->capture_count);
  pcre2_pattern_info(code, PCRE2_INFO_MAXLOOKBEHIND, &compiled->max_lookbehind);
  uint32_t name_count = 0;
  uint32_t entry_size = 0;
  PCRE2_SPTR table = nullptr;
  pcre2_pattern_info(code, PCRE2_INFO_NAMECOUNT, &name_count);
  pcre2_pattern_info(code, PCRE2_INFO_NAMEENTRYSIZE, &entry_size);
  pcre2_pattern_info(code, PCRE2_INFO_NAMETABLE, &table);
  for (uint32_t k = 0; k < name_count; ++k) {
    PCRE2_SPTR entry = table + static_cast<size_t>(k) * entry_size;
    const uint32_t number = (static_cast<uint32_t>(entry[0]) << 8) | entry[1];
    compiled->names.emplace_back(number, std::string(reinterpret_cast<const char*>(entry + 2)));
  }
  std::sort(compiled->names.begin(), compiled->names.end());
  return compiled;
}

}  // namespace

Expected<Regex> Regex::compile(std::string_view python_pattern) {
  BEAM_ASSIGN_OR_RETURN(std::string translated, translate_python_regex(python_pattern));
  BEAM_ASSIGN_OR_RETURN(auto code, compile_code(translated, python_pattern));
  const bool uses_g = python_pattern.find("\\G") != std::string_view::npos;
  return Regex(std::move(code), std::string(python_pattern), uses_g);
}

Expected<Regex> Regex::literal_alternation(const std::vector<std::string>& literals) {
  std::string pattern;
  for (size_t k = 0; k < literals.size(); ++k) {
    if (k > 0) pattern += '|';
    pattern += escape_regex_literal(literals[k]);
  }
  BEAM_ASSIGN_OR_RETURN(auto code, compile_code(pattern, pattern));
  return Regex(std::move(code), pattern, false);
}

Expected<Regex::Match> Regex::search(std::string_view subject, size_t start_offset, Mode mode,
                                     bool subject_at_stream_start, MatchScratch* scratch) const {
  scratch->impl_->reserve(code_->capture_count + 1);
  // The caller guarantees valid UTF-8; without this flag PCRE2 re-validates the whole subject on
  // every call, which makes repeated searches of one buffer quadratic.
  uint32_t options = PCRE2_NO_UTF_CHECK;
  if (mode == Mode::kPartial) options |= PCRE2_PARTIAL_HARD;
  if (!subject_at_stream_start) options |= PCRE2_NOTBOL;
  const int rc = pcre2_match(code_->code, subject_ptr(subject), subject.size(), start_offset,
                             options, scratch->impl_->data, nullptr);
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch->impl_->data);
  if (rc == PCRE2_ERROR_NOMATCH) return Match{};
  if (rc == PCRE2_ERROR_PARTIAL) return Match{Outcome::kPartial, ovector[0], subject.size()};
  if (rc < 0) return make_error(pcre2_message(rc) + " while matching pattern " + pattern_);
  return Match{Outcome::kComplete, ovector[0], ovector[1]};
}

NamedCaptures Regex::named_captures(std::string_view subject, const MatchScratch& scratch) const {
  NamedCaptures out;
  if (code_->names.empty()) return out;
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.impl_->data);
  const uint32_t pairs = pcre2_get_ovector_count(scratch.impl_->data);
  for (const auto& [number, name] : code_->names) {
    if (number >= pairs || ovector[2 * number] == PCRE2_UNSET) continue;
    std::string value(
        subject.substr(ovector[2 * number], ovector[2 * number + 1] - ovector[2 * number]));
    // A duplicated name keeps the value of its last participating group.
    auto it =
        std::find_if(out.begin(), out.end(), [&](const auto& kv) { return kv.first == name; });
    if (it != out.end()) {
      it->second = std::move(value);
    } else {
      out.emplace_back(name, std::move(value));
    }
  }
  return out;
}

Expected<std::vector<Regex::FoundMatch>> Regex::find_all(std::string_view subject) const {
  std::vector<FoundMatch> found;
  MatchScratch scratch;
  scratch.impl_->reserve(code_->capture_count + 1);
  size_t offset = 0;
  bool after_empty = false;
  bool checked = false;  // validate UTF-8 on the first call only
  while (offset <= subject.size()) {
    uint32_t options = after_empty ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
    if (checked) options |= PCRE2_NO_UTF_CHECK;
    checked = true;
    int rc = pcre2_match(code_->code, subject_ptr(subject), subject.size(), offset, options,
                         scratch.impl_->data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH && after_empty) {
      // No non-empty match at the empty match's position: move one code point on.
      ++offset;
      while (offset < subject.size() &&
             (static_cast<unsigned char>(subject[offset]) & 0xC0) == 0x80) {
        ++offset;
      }
      after_empty = false;
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return make_error(pcre2_message(rc) + " while matching pattern " + pattern_);
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.impl_->data);
    FoundMatch m{ovector[0], ovector[1], named_captures(subject, scratch)};
    after_empty = m.start == m.end;
    offset = m.end;
    found.push_back(std::move(m));
  }
  return found;
}

bool Regex::has_group(std::string_view name) const {
  return std::any_of(code_->names.begin(), code_->names.end(),
                     [&](const auto& entry) { return entry.second == name; });
}

std::vector<std::string> Regex::group_names() const {
  std::vector<std::string> names;
  for (const auto& entry : code_->names) names.push_back(entry.second);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

size_t Regex::lookbehind_bytes() const {
  return 4 * static_cast<size_t>(code_->max_lookbehind) + 4;
}

}  // namespace beam::server
