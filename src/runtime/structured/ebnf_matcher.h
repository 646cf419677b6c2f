// EbnfMatcher: which byte strings can still become a whole match of an EbnfGrammar — a set of
// parse stacks over the grammar's lowered rules (llama.cpp's GBNF matcher, with the regular parts
// as ByteDfa terminals). A stack's frames are return positions with the current one on top; a
// top always sits on a terminal, whose DFA state it carries. Tail calls replace their frame, so a
// repetition does not grow its stack. States are plain values: copying one is a memcpy, so a
// vocabulary walk can branch cheaply (VocabIndex::add_allowed). GrammarMaskCache memoizes a
// request's masks by state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "runtime/structured/ebnf_grammar.h"

namespace beam {

// Deepest stack (nesting of recursive rules); a parse that would go deeper is dropped.
inline constexpr int32_t kMaxGrammarDepth = 1024;
// Most stacks one state keeps (ambiguous grammars fork); past it the later ones are dropped,
// which only narrows what the model may write. A mask costs about linearly in stacks, so this
// also bounds one sequence's share of a step.
inline constexpr int32_t kMaxGrammarStacks = 1024;

// Work one token mask may take (VocabIndex::add_allowed): rule expansions, and a step for each
// trie node its walks visit per stack. An ambiguous grammar whose parse stacks multiply (nullable
// rules nested in recursion), or 1,000 stacks each walking the vocabulary, would otherwise make
// one mask cost seconds to minutes and stall every request of the step; about 0.5 s at most.
inline constexpr int64_t kMaxMaskParseSteps = 5'000'000;

// Rule expansions a grammar's start state may take (EbnfGrammar's compile checks it, so the
// engine's unbudgeted EbnfMatcher::initial() stays cheap): ~0.1-0.6 s on one core at most.
inline constexpr int64_t kMaxStartParseSteps = 1'000'000;

// The expansions a caller may still spend; the matcher's calls that take one stop expanding once
// it is spent (their states then hold only the stacks reached so far).
struct ParseBudget {
  int64_t left = kMaxMaskParseSteps;
  bool spent() const { return left < 0; }
};

struct GrammarFrame {
  int32_t element = 0;  // index into EbnfGrammar::elements()
  int32_t state = 0;    // a kTerminal top: its DFA state; 0 elsewhere
  bool operator==(const GrammarFrame&) const = default;
};

// A step EbnfMatcher's expansion still has to take (it runs them last-in first-out instead of
// recursing, so an expansion's length is bounded by its budget, not by the thread's stack).
struct GrammarExpandTask {
  enum class Kind : uint8_t {
    kVisit,      // expand the working stack as it is
    kSetVisit,   // set its top to `frame`, then expand
    kPushVisit,  // push `frame`, then expand
    kSet,        // set its top to `frame`
    kPush,       // push `frame`
    kPop,        // pop its top
  };
  Kind kind = Kind::kVisit;
  GrammarFrame frame;
};

// A set of parse stacks, stored flat, and whether the text so far is a whole match.
struct GrammarState {
  std::vector<GrammarFrame> frames;  // the stacks one after another, each bottom first
  std::vector<uint32_t> ends;        // end offset of each stack in frames
  std::vector<uint64_t> hashes;      // a hash of each stack (duplicates are dropped)
  bool complete = false;             // the root rule can end here
  std::vector<GrammarFrame> work;    // EbnfMatcher::advance's working stack (not state)
  std::vector<GrammarExpandTask> tasks;  // its pending expansion steps (not state)

  bool dead() const { return ends.empty() && !complete; }
  void clear() {
    frames.clear();
    ends.clear();
    hashes.clear();
    complete = false;
  }
};

class EbnfMatcher {
 public:
  explicit EbnfMatcher(std::shared_ptr<const EbnfGrammar> grammar);

  // Before any byte: the root's alternatives expanded. A compiled grammar's takes at most
  // kMaxStartParseSteps (EbnfGrammar's compile checks), so callers need no budget.
  GrammarState initial(ParseBudget* budget = nullptr) const;
  // out = in after one more byte (out is overwritten and keeps its capacity); false when the
  // byte is no continuation (out is then dead). `budget` (optional) pays for the expansions.
  bool advance(const GrammarState& in, uint8_t byte, GrammarState& out,
               ParseBudget* budget = nullptr) const;
  // Advances `state` in place over bytes; false (state unchanged) when they do not match.
  bool advance_bytes(GrammarState& state, std::string_view bytes, GrammarState& scratch,
                     ParseBudget* budget = nullptr) const;
  // out = stack `stack` of `in` alone with its top's DFA state set to `dfa_state` (an accepting
  // one: the parse may leave the terminal there), expanded as after a byte.
  void resume(const GrammarState& in, size_t stack, int32_t dfa_state, GrammarState& out,
              ParseBudget* budget = nullptr) const;
  // Whether the text so far is a whole match (the output may end here).
  bool can_end(const GrammarState& state) const { return state.complete; }
  // Whether leaving stack `stack`'s top terminal can only end the output (nothing after it takes
  // text, as after free text that runs to the end): its accepting states then decide no byte.
  bool only_end_follows(const GrammarState& in, size_t stack, GrammarState& scratch,
                        ParseBudget* budget = nullptr) const;

  const EbnfGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<const EbnfGrammar> grammar_;
};

// What a terminal's DFA state lets through by itself, for mask walks (VocabIndex): `inside`, the
// tokens whose bytes keep the DFA alive without reaching an accepting state on the way (allowed
// whatever follows the terminal), and `exits`, the trie nodes where a token's bytes first reach
// an accepting state (the parse may leave the terminal there; what follows decides the subtree).
// For a terminal whose stack ends there (EbnfMatcher::only_end_follows) accepting states are
// passed through: `inside` holds every token the DFA keeps alive, and there are no exits.
struct TerminalTokens {
  struct Exit {
    uint32_t node = 0;   // TokenTrie::NodeIndex
    uint32_t depth = 0;  // its bytes
    int32_t state = 0;   // the DFA state there (accepting)
  };
  std::vector<uint32_t> inside;  // mask words
  std::vector<Exit> exits;
};

// One request's memo for grammar masks, shared by its sequences (OutputConstraint) and filled
// from the engine's mask threads, hence the lock: the text tokens each grammar state met so far
// allows (the mask words before end tokens), and each terminal state's TerminalTokens.
class GrammarMaskCache {
 public:
  // At most this many of each are kept (each ~19 KB at Beam's vocabulary); past it, lookups miss
  // for new keys and the caller walks.
  static constexpr size_t kMaxEntries = 256;

  // The memoized words of `state`, or nullptr.
  const std::vector<uint32_t>* find(const GrammarState& state);
  // Keeps `words` as the mask of `state` (ignored once full).
  void insert(const GrammarState& state, std::vector<uint32_t> words);
  // The entry of (terminal, DFA state, whether the stack ends there), made by `build` (without
  // the lock held) on first use; nullptr once full.
  const TerminalTokens* terminal_tokens(int32_t terminal, int32_t state, bool ends,
                                        const std::function<TerminalTokens()>& build);

 private:
  static std::vector<int32_t> mask_key(const GrammarState& state);

  std::mutex mu_;
  std::map<std::vector<int32_t>, std::unique_ptr<const std::vector<uint32_t>>> entries_;
  std::map<std::tuple<int32_t, int32_t, bool>, std::unique_ptr<const TerminalTokens>> terminals_;
};

}  // namespace beam
