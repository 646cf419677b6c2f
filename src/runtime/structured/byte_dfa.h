// ByteDfa: a regular expression (a JSON Schema `pattern`, or a whole output's regex) as a
// deterministic automaton over UTF-8 bytes, for constrained decoding (a string frame of
// json_matcher.h, or ConstraintState for a regex output, carries its state). Every state
// it can reach can still reach an accepting one, so a byte it allows never leads into a dead end.
// Immutable once built.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace beam {

struct RegexNode;

// Limits on one pattern's automata (a pattern past them is refused as too complex).
inline constexpr int32_t kMaxPatternNfaStates = 200000;
inline constexpr int32_t kMaxPatternDfaStates = 4096;
// Bytes of the transition table a literal list's automaton (ByteDfa::from_literals) may hold.
inline constexpr size_t kMaxLiteralDfaTableBytes = size_t{64} << 20;
// Most NFA states, edges and transitions one determinization may visit (about 0.1 s of one
// core): a short pattern of nested optional repeats, `(([a-z]?){100}){100}`, otherwise spent
// 27 s and 2 GB before the state limit stopped it (PRIOR-ART pain point 7).
inline constexpr int64_t kMaxPatternBuildSteps = 20'000'000;
// Most steps the automata of one schema, grammar, structural tag or stop list may take together
// (~0.5 s): 200 patterns of 30 ms each took 6.8 s to compile.
inline constexpr int64_t kMaxSharedBuildSteps = 100'000'000;
// Most bytes of transition tables they may hold together (one pattern alone may take ~4 MB: 300
// of them in one schema held 1.1 GB).
inline constexpr int64_t kMaxSharedTableBytes = int64_t{64} << 20;

// The build steps and table bytes several automata of one request draw from (each is also
// bounded by kMaxPatternBuildSteps alone). Not thread-safe.
struct DfaBuildBudget {
  int64_t steps_left = kMaxSharedBuildSteps;
  int64_t bytes_left = kMaxSharedTableBytes;
  bool spent() const { return steps_left <= 0 || bytes_left < 0; }
};

class ByteDfa {
 public:
  static constexpr int32_t kDead = -1;

  // JSON Schema semantics (ECMA-262 syntax, regex_syntax.h): the pattern may match anywhere in
  // the string unless a top-level alternative is anchored by '^' and / or '$'. An error names the
  // unsupported construct, or says the pattern matches no string or is too complex.
  // `budget` (optional) pays for the build and holds its table; once it is spent the build fails,
  // naming it.
  static Expected<std::shared_ptr<const ByteDfa>> from_pattern(std::string_view pattern,
                                                               DfaBuildBudget* budget = nullptr);
  // The same syntax matched against the whole text (vLLM's guided_regex, SGLang's regex): '^' and
  // '$' at the ends of a top-level alternative change nothing.
  static Expected<std::shared_ptr<const ByteDfa>> from_full_match(std::string_view pattern,
                                                                  DfaBuildBudget* budget = nullptr);
  // A parsed expression (regex_syntax.h) matched against the whole text; its kStart / kEnd nodes
  // match the empty string. EbnfGrammar's terminals are built this way.
  static Expected<std::shared_ptr<const ByteDfa>> from_regex(const RegexNode& root,
                                                             DfaBuildBudget* budget = nullptr);
  // The strings both match (an error when none does, or past the state limit).
  static Expected<std::shared_ptr<const ByteDfa>> intersect(const ByteDfa& a, const ByteDfa& b);
  // The automaton matching exactly one of `texts` (vLLM's guided_choice): their trie, one state a
  // distinct prefix, built directly (no determinizing, so no kMaxPatternDfaStates: thousands of
  // long choices fit). An error when there are none, or past kMaxLiteralDfaTableBytes of table.
  static Expected<std::shared_ptr<const ByteDfa>> from_literals(std::span<const std::string> texts);
  // An automaton given whole: next[state * 256 + byte] (kDead: no transition), state 0 the start.
  // Bytes whose columns are equal share a class; states that cannot reach a match are dropped
  // (an error when the start cannot). Structural tags' free text and JSON strings are built so.
  static Expected<std::shared_ptr<const ByteDfa>> from_table(const std::vector<int32_t>& next,
                                                             const std::vector<uint8_t>& accepting);

  int32_t start() const { return 0; }
  // The state after `byte`, or kDead.
  int32_t next(int32_t state, uint8_t byte) const {
    return next_[static_cast<size_t>(state) * num_classes_ + class_of_[byte]];
  }
  // The state after `bytes` from `state`, or kDead.
  int32_t walk(int32_t state, std::string_view bytes) const {
    for (char c : bytes) {
      if (state == kDead) return kDead;
      state = next(state, static_cast<uint8_t>(c));
    }
    return state;
  }
  // Whether the bytes so far are a match.
  bool accepting(int32_t state) const { return accepting_[static_cast<size_t>(state)] != 0; }
  // The fewest code points (UTF-8 lead bytes) that take `state` to a match: with a length bound,
  // a byte whose state needs more than the bound leaves is refused (no dead end).
  int32_t min_code_points(int32_t state) const {
    return min_code_points_[static_cast<size_t>(state)];
  }
  // Whether `text` as a whole is a match.
  bool matches(std::string_view text) const {
    const int32_t s = walk(start(), text);
    return s != kDead && accepting(s);
  }
  size_t num_states() const { return accepting_.size(); }
  // The transition table's size (what the automaton costs in memory, and about in building).
  size_t table_bytes() const { return next_.size() * sizeof(int32_t); }

 private:
  friend class DfaBuilder;
  ByteDfa() = default;

  std::array<uint8_t, 256> class_of_{};  // bytes that no transition tells apart share a class
  size_t num_classes_ = 1;
  std::vector<int32_t> next_;       // [num_states, num_classes]
  std::vector<uint8_t> accepting_;  // [num_states]
  std::vector<int32_t> min_code_points_;  // [num_states]
};

}  // namespace beam
