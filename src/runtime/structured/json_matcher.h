// JsonMatcher: which byte strings can still become JSON text of a JsonGrammar — a pushdown
// matcher over bytes that keeps every live parse (anyOf, enums and object keys fork it). States
// are plain values: copying one is a memcpy of its frames, so a vocabulary walk can branch
// cheaply (token_mask.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/structured/json_grammar.h"

namespace beam {

// Whitespace between JSON tokens is one space, or a newline and at most this many spaces or tabs
// (as llama.cpp's JSON grammars): a model cannot stall in whitespace.
inline constexpr int kMaxJsonIndent = 20;
// Most bytes of one number (a model cannot write digits forever).
inline constexpr int kMaxJsonNumberBytes = 40;
// Deepest nesting of objects and arrays.
inline constexpr int kMaxJsonDepth = 64;

// The in-string part of the matcher, shared with the vocabulary's string caches: phase 0 plain
// text, 1 after a backslash, 2-5 inside \uXXXX with phase - 1 hex digits to go, 6-12 inside a
// UTF-8 sequence (strings hold valid UTF-8 only).
inline constexpr int kJsonStringPhases = 13;
enum class StringByte : uint8_t { kReject, kInside, kClose };
StringByte json_string_byte(uint8_t& phase, uint8_t c);
// json_string_byte for a string whose value must match `dfa` (GrammarNode::pattern): the value's
// bytes (escapes decoded) move dfa_state, and the quote closes only a match. A \u escape is
// refused there (the model writes the character itself), and so is a byte after which no match
// fits max_length (-1: none) code points, given the code_points before it; neither in-out
// argument changes on kReject.
StringByte pattern_string_byte(const ByteDfa& dfa, int64_t max_length, int64_t code_points,
                               uint8_t& phase, int32_t& dfa_state, uint8_t c);

enum class FrameKind : uint8_t { kRoot, kValue, kObject, kArray, kString, kNumber, kLiteral };

// One level of a parse. Field use by kind: docs/structured_output.md ("Matcher").
struct MatchFrame {
  int32_t node = 0;  // grammar node; kLiteral: literal id
  FrameKind kind = FrameKind::kRoot;
  uint8_t phase = 0;  // kind-specific position
  uint16_t ws = 0;    // whitespace at this position: 0 none, 1 a space, 2 + indent after a newline
  int32_t a = 0;      // kObject: next declared property; kArray: items; kString: code points;
                      // kNumber: bytes; kLiteral: bytes matched
  int32_t b = 0;      // kObject: the current key's property (-1: an extra key); kNumber of a
                      // bounded node: the integer part read (uint32, saturated at 2^31), and ws
                      // bit 0 a minus sign, bit 1 a nonzero fraction digit; kString with a
                      // pattern: the pattern automaton's state
  bool operator==(const MatchFrame&) const = default;
};

// A set of parse stacks (usually one), stored flat.
struct MatchState {
  std::vector<MatchFrame> frames;  // the stacks one after another, each bottom (kRoot) first
  std::vector<uint32_t> ends;      // end offset of each stack in frames

  bool dead() const { return ends.empty(); }
  size_t num_stacks() const { return ends.size(); }
  std::span<const MatchFrame> stack(size_t i) const {
    const size_t begin = i == 0 ? 0 : ends[i - 1];
    return std::span<const MatchFrame>(frames).subspan(begin, ends[i] - begin);
  }
  void clear() {
    frames.clear();
    ends.clear();
  }
};

class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> grammar);

  // Before any byte: one stack expecting the root value.
  MatchState initial() const;
  // out = in after one more byte (out is overwritten and keeps its capacity); false when no parse
  // survives (out is then dead).
  bool advance(const MatchState& in, uint8_t byte, MatchState& out) const;
  // Advances `state` in place over bytes; false (state unchanged) when they do not match.
  bool advance_bytes(MatchState& state, std::string_view bytes, MatchState& scratch) const;
  // Whether the text so far is a complete value of the root (the output may end here).
  bool can_end(const MatchState& state) const;

  const JsonGrammar& grammar() const { return *grammar_; }

 private:
  void step(const MatchFrame* frames, int n, uint8_t c, MatchState& out) const;
  void start_value(MatchFrame* f, int n, uint8_t c, MatchState& out) const;
  void push_key_candidates(MatchFrame* f, int n, MatchState& out) const;
  static void emit(const MatchFrame* f, int n, MatchState& out);
  static void dedupe(MatchState& out, size_t first_stack);

  std::shared_ptr<const JsonGrammar> grammar_;
};

}  // namespace beam
