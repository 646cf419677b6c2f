// VocabIndex: the model's text tokens arranged for token masks — a byte trie walked with a
// JsonMatcher or EbnfMatcher state, plus per string phase the tokens that stay inside a JSON string
// (one bitset copy instead of a walk over the whole vocabulary) and the tokens that close it (a
// small trie of what follows their quote). A string with a pattern walks the trie with the string
// lexer and the pattern's automaton instead. Built once per model; immutable and shared afterwards.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/api/sampling.h"
#include "runtime/structured/ebnf_matcher.h"
#include "runtime/structured/json_matcher.h"
#include "runtime/structured/pattern_mask_cache.h"
#include "runtime/structured/token_trie.h"

namespace beam {

struct VocabToken {
  int32_t id = 0;
  std::string bytes;  // what the token writes (BPE bytes)
};

// Token bitmasks have the sampling op's layout (kernels/api/sampling.h, allowed_mask_words):
// token t is bit t % 32 of word t / 32.
inline void set_mask_bit(std::span<uint32_t> bits, int32_t token) {
  bits[static_cast<size_t>(token) / 32] |= 1u << (token % 32);
}
inline void clear_mask_bit(std::span<uint32_t> bits, int32_t token) {
  bits[static_cast<size_t>(token) / 32] &= ~(1u << (token % 32));
}
inline bool mask_bit(std::span<const uint32_t> bits, int32_t token) {
  return (bits[static_cast<size_t>(token) / 32] >> (token % 32)) & 1u;
}

// A GBNF mask walk's levels (one per trie depth; VocabIndex::walk says how they are used).
struct GrammarWalk {
  std::vector<GrammarState> states;             // built in full where a walk needs it
  std::vector<std::vector<int32_t>> tops;       // each stack top's DFA state (-1: dead)
  std::vector<std::vector<int32_t>> terminals;  // each stack top's terminal
  std::vector<std::vector<uint8_t>> ends;       // each stack: only the end follows its terminal?
  std::vector<uint8_t> path;                    // the bytes from the trie's root
  GrammarState scratch;
  GrammarState resumed;  // a stack resumed past its terminal (EbnfMatcher::resume)
  ParseBudget budget;    // the mask's expansions (kMaxMaskParseSteps)
};

// Per-caller scratch for mask walks (one MatchState per trie depth; a GrammarWalk).
struct MaskScratch {
  std::vector<MatchState> depth_states;
  GrammarWalk grammar;
  std::vector<uint32_t> grammar_words;  // a grammar mask before it is memoized
  std::vector<uint32_t> closing_bits;  // a bounded string's closing tokens before their filter
  MatchState closable;                 // a pattern string's state where a token's quote closes it
};

class VocabIndex {
 public:
  // vocab_size: the logits' width. tokens: every id the model may write as text (added tokens
  // included; a constraint leaves out those its output hides, OutputConstraint::hidden_tokens);
  // ids < vocab_size, non-empty.
  VocabIndex(int64_t vocab_size, std::vector<VocabToken> tokens);

  int64_t vocab_size() const { return vocab_size_; }
  // The bytes of a text token; empty for other ids.
  std::string_view bytes(int32_t id) const;
  // Sets the bit of every text token after which `state` still has a live parse (other bits are
  // left as they are). `patterns` (optional) memoizes the walks inside patterned strings without
  // length bounds; the bits are the same with or without it.
  void add_allowed(const JsonMatcher& matcher, const MatchState& state, std::span<uint32_t> bits,
                   MaskScratch& scratch, PatternMaskCache* patterns = nullptr) const;
  // The same for output that must match `dfa` (OutputConstraint::regex) from `state` on: every text
  // token whose bytes keep the DFA alive.
  void add_allowed(const ByteDfa& dfa, int32_t state, std::span<uint32_t> bits) const;
  // The same for output that must match a GBNF grammar from `state` on: every text token whose
  // bytes keep a parse alive. `masks` (optional) memoizes the result by state. False (bits
  // unspecified) when the walk needs more than kMaxMaskParseSteps expansions: a grammar too
  // ambiguous to enforce.
  bool add_allowed(const EbnfMatcher& matcher, const GrammarState& state, std::span<uint32_t> bits,
                   MaskScratch& scratch, GrammarMaskCache* masks = nullptr) const;
  // Sets the bit of every text token made only of JSON whitespace (space, tab, newline, return).
  void add_whitespace(std::span<uint32_t> bits) const;
  bool is_whitespace(int32_t id) const;

 private:
  // A token with the code points it adds to the string (before its closing quote, if any).
  struct CountedToken {
    int32_t id = 0;
    uint32_t code_points = 0;
    auto operator<=>(const CountedToken&) const = default;
  };
  struct StringPhaseCache {
    std::vector<uint32_t> inside;               // tokens that leave the string open
    std::vector<CountedToken> inside_by_count;  // the same, fewest code points first
    TokenTrie closing;                        // tokens that close it, by the bytes after the quote
    std::vector<CountedToken> closing_by_id;  // the closing tokens, by id
  };

  StringPhaseCache build_string_cache(uint8_t phase) const;
  void walk(const TokenTrie& trie, TokenTrie::NodeIndex node, size_t depth, const JsonMatcher& m,
            std::span<uint32_t> bits, MaskScratch& scratch) const;
  // Each trie node the walk visits spends one unit of `budget`.
  TerminalTokens terminal_tokens(const ByteDfa& dfa, int32_t state, bool ends,
                                 ParseBudget& budget) const;
  static void set_walk_base(const EbnfMatcher& m, GrammarWalk& w, size_t level);
  void walk(TokenTrie::NodeIndex node, size_t depth, size_t base, const EbnfMatcher& m,
            std::span<uint32_t> bits, GrammarWalk& w) const;
  void add_string_tokens(const JsonMatcher& m, const MatchState& state, const GrammarNode& node,
                         std::span<uint32_t> bits, MaskScratch& scratch) const;
  void add_pattern_tokens(const JsonMatcher& m, const MatchState& state, const GrammarNode& node,
                          std::span<uint32_t> bits, MaskScratch& scratch) const;
  PatternStringTokens build_pattern_tokens(const ByteDfa& dfa, int32_t state, uint8_t phase) const;
  void add_cached_pattern_tokens(const JsonMatcher& m, const MatchState& state,
                                 const PatternStringTokens& tokens, std::span<uint32_t> bits,
                                 MaskScratch& scratch) const;

  int64_t vocab_size_;
  size_t max_token_bytes_ = 0;
  std::vector<std::string> bytes_;  // [vocab_size]
  std::vector<int32_t> whitespace_;  // the whitespace-only text tokens, ascending
  TokenTrie trie_;
  std::vector<StringPhaseCache> string_cache_;  // [kJsonStringPhases]
};

}  // namespace beam
