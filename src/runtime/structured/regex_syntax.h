// The regular expressions of JSON Schema's `pattern` (ECMA-262 syntax) parsed into a tree of
// code point sets, for byte_dfa.h. The subset is what a DFA can decide: no backreferences,
// lookaround or word boundaries; `^` / `$` only at the start / end of a top-level alternative.
// docs/structured_output.md ("Patterns") lists it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace beam {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;
// Most repetitions one quantifier may ask for ({n,m}: n, m <= this).
inline constexpr int32_t kMaxRegexRepeat = 1000;

struct CodePointRange {
  char32_t lo = 0, hi = 0;  // inclusive
  bool operator==(const CodePointRange&) const = default;
};

struct RegexNode {
  enum class Kind : uint8_t {
    kEmpty,      // matches the empty string
    kSet,        // one code point of `set`
    kConcat,     // children in sequence
    kAlternate,  // any one child
    kRepeat,     // children[0] min..max times (max -1: unbounded)
    kStart,      // '^' (only as the first item of a top-level alternative)
    kEnd,        // '$' (only as the last item of a top-level alternative)
  };
  Kind kind = Kind::kEmpty;
  std::vector<CodePointRange> set = {};  // kSet: sorted, disjoint, no surrogates
  std::vector<RegexNode> children = {};
  int32_t min = 0, max = -1;  // kRepeat
};

// Code point sets: sorted, merged and without surrogates (which no UTF-8 text holds); the
// complement is within [0, kMaxCodePoint].
std::vector<CodePointRange> normalized_ranges(std::vector<CodePointRange> ranges);
std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& ranges);

// Parses a pattern (UTF-8). The root is a kAlternate of the top-level alternatives, each a
// kConcat; an error names the offending construct and its byte offset.
Expected<RegexNode> parse_regex(std::string_view pattern);

}  // namespace beam
