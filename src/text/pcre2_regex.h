// A compiled PCRE2 pattern (UTF + UCP, JIT when available) that lists the non-empty matches in
// a text, as the pre-tokenizer's Split needs them. Immutable and thread-safe after compile; each
// thread brings its own RegexMatchData.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace beam::text {

// Per-thread match state (pcre2_match_data); reusable across calls and patterns.
class RegexMatchData {
 public:
  RegexMatchData();
  ~RegexMatchData();
  RegexMatchData(RegexMatchData&&) noexcept;
  RegexMatchData& operator=(RegexMatchData&&) noexcept;

  void* raw() const { return data_; }

 private:
  void* data_ = nullptr;  // pcre2_match_data_8*
};

// Byte range [begin, end) of a match.
using ByteRange = std::pair<uint32_t, uint32_t>;

class Pcre2Regex {
 public:
  // Compiles a tokenizer.json "Regex" pattern (Oniguruma syntax, translated to PCRE2).
  static Expected<Pcre2Regex> from_oniguruma(std::string_view pattern);
  // Compiles a tokenizer.json "String" pattern: the literal text.
  static Expected<Pcre2Regex> from_literal(std::string_view literal);

  Pcre2Regex(Pcre2Regex&&) noexcept;
  Pcre2Regex& operator=(Pcre2Regex&&) noexcept;
  ~Pcre2Regex();

  // Replaces `matches` with the non-empty leftmost matches of valid UTF-8 `text`, in order
  // (an empty match advances the search by one character, as find_iter / matchAll do).
  // Fails only when PCRE2 runs out of its match or memory limits.
  Status find_all(std::string_view text, RegexMatchData& md, std::vector<ByteRange>& matches) const;

 private:
  Pcre2Regex() = default;
  static Expected<Pcre2Regex> compile(const std::string& pcre2_pattern, std::string_view shown);

  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace beam::text
