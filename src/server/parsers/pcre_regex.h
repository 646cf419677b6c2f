// Regex: a compiled PCRE2 pattern (UTF, Unicode classes, DOTALL) written in Python `re`/`regex`
// syntax, with the searches the response parser needs: leftmost, partial (for hold-back), all.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace beam::server {

// Named groups of one match, in group-number order; groups that did not participate are absent.
using NamedCaptures = std::vector<std::pair<std::string, std::string>>;

class Regex;

// Per-caller match scratch (PCRE2 match data). A Regex is immutable and may be shared between
// threads; each thread searching it brings its own MatchScratch.
class MatchScratch {
 public:
  MatchScratch();
  ~MatchScratch();
  MatchScratch(MatchScratch&&) noexcept;
  MatchScratch& operator=(MatchScratch&&) noexcept;

 private:
  friend class Regex;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Regex {
 public:
  enum class Outcome { kNone, kPartial, kComplete };
  struct Match {
    Outcome outcome = Outcome::kNone;
    size_t start = 0;  // byte offsets into the subject; a partial match ends at the subject end
    size_t end = 0;
  };
  enum class Mode {
    kFull,     // ordinary leftmost search
    kPartial,  // PCRE2_PARTIAL_HARD: an attempt that runs into the subject end is kPartial
  };

  // Compiles a pattern in Python syntax (translated: \Z, \uXXXX, \UXXXXXXXX, {,n}). Errors name
  // the pattern and PCRE2's reason.
  static Expected<Regex> compile(std::string_view python_pattern);
  // An alternation of literal strings, tried in the given order.
  static Expected<Regex> literal_alternation(const std::vector<std::string>& literals);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // Leftmost match starting at or after `start_offset`. `subject_at_stream_start` false means
  // the subject does not begin at the real start of the text (so `^` cannot match there).
  // Precondition: `subject` is valid UTF-8 (not re-checked: repeated searches stay linear).
  // Runtime failures (match or heap limits) are errors.
  Expected<Match> search(std::string_view subject, size_t start_offset, Mode mode,
                         bool subject_at_stream_start, MatchScratch* scratch) const;
  // Named captures of the last kComplete match found with `scratch` on `subject`.
  NamedCaptures named_captures(std::string_view subject, const MatchScratch& scratch) const;
  // All non-overlapping matches (Python re.finditer order and empty-match rules), each with
  // its named captures. Invalid UTF-8 in `subject` is an error.
  struct FoundMatch {
    size_t start = 0;
    size_t end = 0;
    NamedCaptures captures;
  };
  Expected<std::vector<FoundMatch>> find_all(std::string_view subject) const;
  // Python re.sub with a callback producing each replacement.
  template <typename Fn>
  Expected<std::string> substitute(std::string_view subject, Fn&& replacement) const;

  bool has_group(std::string_view name) const;
  std::vector<std::string> group_names() const;  // sorted, unique
  // Bytes of text before a search start that lookbehind, \b or ^ (multiline) may inspect.
  size_t lookbehind_bytes() const;
  // True when the pattern uses \G (its result depends on the search start, so it is never
  // reused for a later start offset).
  bool depends_on_search_start() const { return depends_on_search_start_; }
  const std::string& pattern() const { return pattern_; }

  struct Code;  // opaque compiled PCRE2 pattern

 private:
  Regex(std::shared_ptr<const Code> code, std::string pattern, bool depends_on_search_start);
  std::shared_ptr<const Code> code_;
  std::string pattern_;  // as written (for messages)
  bool depends_on_search_start_ = false;
};

// Escapes text so that PCRE2 matches it literally.
std::string escape_regex_literal(std::string_view text);
// Rewrites Python regex syntax that PCRE2 spells differently; errors for unsupported escapes.
Expected<std::string> translate_python_regex(std::string_view python_pattern);

template <typename Fn>
Expected<std::string> Regex::substitute(std::string_view subject, Fn&& replacement) const {
  BEAM_ASSIGN_OR_RETURN(auto matches, find_all(subject));
  std::string out;
  size_t copied = 0;
  for (const FoundMatch& m : matches) {
    out.append(subject.substr(copied, m.start - copied));
    out += replacement(subject.substr(m.start, m.end - m.start), m);
    copied = m.end;
  }
  out.append(subject.substr(copied));
  return out;
}

}  // namespace beam::server
