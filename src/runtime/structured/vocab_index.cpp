#include "runtime/structured/vocab_index.h"

#include <algorithm>
#include <tuple>

#include "core/check.h"

namespace beam {
namespace {

// GrammarWalk::ends of a stack not looked at yet (0: text may follow, 1: only the end).
constexpr uint8_t kEndsUnknown = 2;

std::vector<std::pair<std::string, int32_t>> trie_entries(const std::vector<VocabToken>& tokens) {
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(tokens.size());
  for (const VocabToken& t : tokens) entries.emplace_back(t.bytes, t.id);
  return entries;
}

}  // namespace

VocabIndex::VocabIndex(int64_t vocab_size, std::vector<VocabToken> tokens)
    : vocab_size_(vocab_size),
      bytes_(static_cast<size_t>(vocab_size)),
      trie_(trie_entries(tokens)) {
  for (VocabToken& t : tokens) {
    BEAM_CHECK(t.id >= 0 && t.id < vocab_size) << "token id " << t.id << " outside the vocabulary";
    BEAM_CHECK(!t.bytes.empty()) << "token " << t.id << " writes nothing";
    max_token_bytes_ = std::max(max_token_bytes_, t.bytes.size());
    bytes_[static_cast<size_t>(t.id)] = std::move(t.bytes);
  }
  for (uint8_t phase = 0; phase < kJsonStringPhases; ++phase)
    string_cache_.push_back(build_string_cache(phase));
  for (int32_t id = 0; id < vocab_size; ++id) {
    const std::string& b = bytes_[static_cast<size_t>(id)];
    if (!b.empty() && b.find_first_not_of(" \t\n\r") == std::string::npos)
      whitespace_.push_back(id);
  }
}

void VocabIndex::add_whitespace(std::span<uint32_t> bits) const {
  for (int32_t id : whitespace_) set_mask_bit(bits, id);
}

bool VocabIndex::is_whitespace(int32_t id) const {
  return std::binary_search(whitespace_.begin(), whitespace_.end(), id);
}

std::string_view VocabIndex::bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return {};
  return bytes_[static_cast<size_t>(id)];
}

// Walks the trie with only the string lexer: a byte that closes the string sends the node's whole
// subtree to the closing trie (keyed by what follows the quote); others stay inside or die. Code
// points are counted as the matcher counts them (a plain-phase byte other than the quote).
VocabIndex::StringPhaseCache VocabIndex::build_string_cache(uint8_t phase) const {
  StringPhaseCache cache;
  cache.inside.assign(static_cast<size_t>(allowed_mask_words(vocab_size_)), 0);
  std::vector<std::pair<std::string, int32_t>> closing;
  auto visit = [&](auto& self, TokenTrie::NodeIndex node, size_t depth, uint8_t p,
                   uint32_t code_points) -> void {
    for (TokenTrie::NodeIndex child = node + 1; child < trie_.subtree_end(node);
         child = trie_.subtree_end(child)) {
      uint8_t q = p;
      const uint8_t c = trie_.byte(child);
      const uint32_t counted = code_points + (p == 0 && c != '"' ? 1 : 0);
      switch (json_string_byte(q, c)) {
        case StringByte::kReject:
          break;
        case StringByte::kClose:
          for (int32_t id : trie_.tokens_under(child)) {
            closing.emplace_back(bytes_[static_cast<size_t>(id)].substr(depth + 1), id);
            cache.closing_by_id.push_back({id, code_points});
          }
          break;
        case StringByte::kInside:
          for (int32_t id : trie_.tokens_at(child)) {
            set_mask_bit(cache.inside, id);
            cache.inside_by_count.push_back({id, counted});
          }
          self(self, child, depth + 1, q, counted);
          break;
      }
    }
  };
  visit(visit, TokenTrie::kRoot, 0, phase, 0);
  std::sort(cache.inside_by_count.begin(), cache.inside_by_count.end(),
            [](const CountedToken& x, const CountedToken& y) {
              return std::tie(x.code_points, x.id) < std::tie(y.code_points, y.id);
            });
  std::sort(cache.closing_by_id.begin(), cache.closing_by_id.end());
  cache.closing = TokenTrie(std::move(closing));
  return cache;
}

// The top of the only stack is a string: its phase's cached inside tokens (those within
// maxLength), then the closing tokens from the state after the quote (the same whatever came
// before it in the token), kept when the code points before their quote fit the length range.
void VocabIndex::add_string_tokens(const JsonMatcher& m, const MatchState& state,
                                   const GrammarNode& node, std::span<uint32_t> bits,
                                   MaskScratch& scratch) const {
  const MatchFrame& top = state.stack(0).back();
  const StringPhaseCache& cache = string_cache_[top.phase];
  const int64_t have = top.a;
  const bool bounded = node.min_length > 0 || node.max_length >= 0;
  if (node.max_length < 0) {
    for (size_t w = 0; w < bits.size(); ++w) bits[w] |= cache.inside[w];
  } else {
    for (const CountedToken& t : cache.inside_by_count) {
      if (have + t.code_points > node.max_length) break;
      set_mask_bit(bits, t.id);
    }
  }
  MatchState closable = state;
  closable.frames.back().phase = 0;
  closable.frames.back().a = static_cast<int32_t>(std::max<int64_t>(have, node.min_length));
  if (!m.advance(closable, '"', scratch.depth_states[0])) return;
  if (!bounded) {
    walk(cache.closing, TokenTrie::kRoot, 0, m, bits, scratch);
    return;
  }
  scratch.closing_bits.assign(bits.size(), 0);
  walk(cache.closing, TokenTrie::kRoot, 0, m, scratch.closing_bits, scratch);
  for (const CountedToken& t : cache.closing_by_id) {
    const int64_t length = have + t.code_points;
    if (mask_bit(scratch.closing_bits, t.id) && length >= node.min_length &&
        (node.max_length < 0 || length <= node.max_length))
      set_mask_bit(bits, t.id);
  }
}

// The top of the only stack is a string with a pattern: the trie walked with only the string
// lexer and the pattern's automaton (what the matcher does there, without its state copies);
// where a token's quote closes the string, the rest of its bytes go through the matcher.
void VocabIndex::add_pattern_tokens(const JsonMatcher& m, const MatchState& state,
                                    const GrammarNode& node, std::span<uint32_t> bits,
                                    MaskScratch& scratch) const {
  const ByteDfa& dfa = m.grammar().pattern(node.pattern);
  const MatchFrame& top = state.stack(0).back();
  auto visit = [&](auto& self, TokenTrie::NodeIndex at, size_t depth, uint8_t phase,
                   int32_t dfa_state, int64_t code_points) -> void {
    for (TokenTrie::NodeIndex child = at + 1; child < trie_.subtree_end(at);
         child = trie_.subtree_end(child)) {
      const uint8_t c = trie_.byte(child);
      uint8_t p = phase;
      int32_t d = dfa_state;
      switch (pattern_string_byte(dfa, node.max_length, code_points, p, d, c)) {
        case StringByte::kReject:
          break;
        case StringByte::kClose: {
          if (code_points < node.min_length) break;
          scratch.closable = state;
          MatchFrame& f = scratch.closable.frames.back();
          f.phase = phase;
          f.b = dfa_state;
          f.a = static_cast<int32_t>(code_points);
          if (m.advance(scratch.closable, c, scratch.depth_states[depth + 1]))
            walk(trie_, child, depth + 1, m, bits, scratch);
          break;
        }
        case StringByte::kInside:  // maxLength held: pattern_string_byte checked it
          for (int32_t id : trie_.tokens_at(child)) set_mask_bit(bits, id);
          self(self, child, depth + 1, p, d, code_points + (phase == 0 ? 1 : 0));
          break;
      }
    }
  };
  visit(visit, TokenTrie::kRoot, 0, top.phase, top.b, top.a);
}

// add_pattern_tokens' walk without length bounds, recorded instead of applied: the tokens that
// stay inside, and the closing ones keyed by what follows their quote.
PatternStringTokens VocabIndex::build_pattern_tokens(const ByteDfa& dfa, int32_t state,
                                                     uint8_t phase) const {
  PatternStringTokens out;
  out.inside.assign(static_cast<size_t>(allowed_mask_words(vocab_size_)), 0);
  std::vector<std::pair<std::string, int32_t>> closing;
  auto visit = [&](auto& self, TokenTrie::NodeIndex at, size_t depth, uint8_t lexer,
                   int32_t dfa_state) -> void {
    for (TokenTrie::NodeIndex child = at + 1; child < trie_.subtree_end(at);
         child = trie_.subtree_end(child)) {
      uint8_t p = lexer;
      int32_t d = dfa_state;
      switch (pattern_string_byte(dfa, -1, 0, p, d, trie_.byte(child))) {
        case StringByte::kReject:
          break;
        case StringByte::kClose:
          out.accepting_state = dfa_state;
          for (int32_t id : trie_.tokens_under(child))
            closing.emplace_back(bytes_[static_cast<size_t>(id)].substr(depth + 1), id);
          break;
        case StringByte::kInside:
          for (int32_t id : trie_.tokens_at(child)) set_mask_bit(out.inside, id);
          self(self, child, depth + 1, p, d);
          break;
      }
    }
  };
  visit(visit, TokenTrie::kRoot, 0, phase, state);
  out.closing = TokenTrie(std::move(closing));
  return out;
}

// A memoized entry applied: its inside tokens, then its closing tokens walked from the state
// after the quote (the same for each: the string's frame is gone by then).
void VocabIndex::add_cached_pattern_tokens(const JsonMatcher& m, const MatchState& state,
                                           const PatternStringTokens& tokens,
                                           std::span<uint32_t> bits, MaskScratch& scratch) const {
  for (size_t w = 0; w < bits.size(); ++w) bits[w] |= tokens.inside[w];
  if (tokens.accepting_state < 0) return;
  scratch.closable = state;
  MatchFrame& f = scratch.closable.frames.back();
  f.phase = 0;
  f.b = tokens.accepting_state;
  if (m.advance(scratch.closable, '"', scratch.depth_states[0]))
    walk(tokens.closing, TokenTrie::kRoot, 0, m, bits, scratch);
}

void VocabIndex::add_allowed(const JsonMatcher& matcher, const MatchState& state,
                             std::span<uint32_t> bits, MaskScratch& scratch,
                             PatternMaskCache* patterns) const {
  BEAM_CHECK_EQ(static_cast<int64_t>(bits.size()), allowed_mask_words(vocab_size_));
  if (state.dead()) return;
  if (scratch.depth_states.size() < max_token_bytes_ + 1)
    scratch.depth_states.resize(max_token_bytes_ + 1);
  if (state.num_stacks() == 1 && state.stack(0).back().kind == FrameKind::kString) {
    const MatchFrame& top = state.stack(0).back();
    const GrammarNode& node = matcher.grammar().node(top.node);
    if (node.pattern < 0) {
      add_string_tokens(matcher, state, node, bits, scratch);
      return;
    }
    const ByteDfa& dfa = matcher.grammar().pattern(node.pattern);
    const PatternStringTokens* memo = nullptr;
    if (patterns && node.min_length == 0 && node.max_length < 0)
      memo = patterns->get(&dfa, top.b, top.phase,
                           [&] { return build_pattern_tokens(dfa, top.b, top.phase); });
    if (memo)
      add_cached_pattern_tokens(matcher, state, *memo, bits, scratch);
    else
      add_pattern_tokens(matcher, state, node, bits, scratch);
    return;
  }
  scratch.depth_states[0] = state;
  walk(trie_, TokenTrie::kRoot, 0, matcher, bits, scratch);
}

void VocabIndex::add_allowed(const ByteDfa& dfa, int32_t state, std::span<uint32_t> bits) const {
  BEAM_CHECK_EQ(static_cast<int64_t>(bits.size()), allowed_mask_words(vocab_size_));
  auto visit = [&](auto& self, TokenTrie::NodeIndex at, int32_t s) -> void {
    for (TokenTrie::NodeIndex child = at + 1; child < trie_.subtree_end(at);
         child = trie_.subtree_end(child)) {
      const int32_t next = dfa.next(s, trie_.byte(child));
      if (next == ByteDfa::kDead) continue;
      for (int32_t id : trie_.tokens_at(child)) set_mask_bit(bits, id);
      self(self, child, next);
    }
  };
  visit(visit, TokenTrie::kRoot, state);
}

// Each stack alone (a token is allowed when some stack's parse survives it): its top terminal
// state's inside tokens (memoized per terminal state), then below each of its exits a walk from
// the parse resumed there. A stack that only the end can follow has no exits: free text that
// runs to the output's end, accepting everywhere, costs one DFA walk, not a parse per trie node.
bool VocabIndex::add_allowed(const EbnfMatcher& matcher, const GrammarState& state,
                             std::span<uint32_t> bits, MaskScratch& scratch,
                             GrammarMaskCache* masks) const {
  BEAM_CHECK_EQ(static_cast<int64_t>(bits.size()), allowed_mask_words(vocab_size_));
  const std::vector<uint32_t>* words = masks ? masks->find(state) : nullptr;
  if (!words) {
    GrammarWalk& w = scratch.grammar;
    w.budget = ParseBudget{};
    std::vector<uint32_t>& out = scratch.grammar_words;
    out.assign(bits.size(), 0);
    const size_t levels = max_token_bytes_ + 1;
    if (w.states.size() < levels) {
      w.states.resize(levels);
      w.tops.resize(levels);
      w.terminals.resize(levels);
      w.ends.resize(levels);
      w.path.resize(levels);
    }
    const EbnfGrammar& g = matcher.grammar();
    TerminalTokens local;
    for (size_t i = 0; i < state.ends.size(); ++i) {
      const GrammarFrame& top = state.frames[state.ends[i] - 1];
      const int32_t terminal = g.elements()[static_cast<size_t>(top.element)].arg;
      const ByteDfa& dfa = g.terminal(terminal);
      auto tokens = [&](bool ends) {
        auto build = [&] { return terminal_tokens(dfa, top.state, ends, w.budget); };
        const TerminalTokens* t =
            masks ? masks->terminal_tokens(terminal, top.state, ends, build) : nullptr;
        if (t) return t;
        local = build();
        return static_cast<const TerminalTokens*>(&local);
      };
      const TerminalTokens* tt = tokens(false);
      if (!tt->exits.empty() && matcher.only_end_follows(state, i, w.resumed, &w.budget))
        tt = tokens(true);
      if (w.budget.spent()) return false;
      for (size_t k = 0; k < out.size(); ++k) out[k] |= tt->inside[k];
      int32_t resumed_state = ByteDfa::kDead;
      for (const TerminalTokens::Exit& exit : tt->exits) {
        if (exit.state != resumed_state) {
          matcher.resume(state, i, exit.state, w.resumed, &w.budget);
          resumed_state = exit.state;
        }
        if (w.resumed.dead()) continue;
        for (int32_t id : trie_.tokens_at(exit.node)) set_mask_bit(out, id);
        if (w.resumed.ends.empty()) continue;  // a whole match that nothing may follow
        w.states[exit.depth] = w.resumed;
        set_walk_base(matcher, w, exit.depth);
        walk(exit.node, exit.depth, exit.depth, matcher, out, w);
        if (w.budget.spent()) return false;
      }
    }
    if (w.budget.spent()) return false;
    if (masks) masks->insert(state, out);
    words = &out;
  }
  for (size_t i = 0; i < bits.size(); ++i) bits[i] |= (*words)[i];
  return true;
}

// A DFA-only walk of the trie from `state`, stopping at the first accepting state of each path
// (unless only the end follows: `ends`). Exits come sorted by their DFA state, so a mask resumes
// each state's parse once.
TerminalTokens VocabIndex::terminal_tokens(const ByteDfa& dfa, int32_t state, bool ends,
                                           ParseBudget& budget) const {
  TerminalTokens t;
  t.inside.assign(static_cast<size_t>(allowed_mask_words(vocab_size_)), 0);
  auto visit = [&](auto& self, TokenTrie::NodeIndex node, uint32_t depth, int32_t s) -> void {
    for (TokenTrie::NodeIndex child = node + 1; child < trie_.subtree_end(node);
         child = trie_.subtree_end(child)) {
      --budget.left;
      const int32_t next = dfa.next(s, trie_.byte(child));
      if (next == ByteDfa::kDead) continue;
      if (!ends && dfa.accepting(next)) {
        t.exits.push_back({child, depth + 1, next});
        continue;
      }
      for (int32_t id : trie_.tokens_at(child)) set_mask_bit(t.inside, id);
      self(self, child, depth + 1, next);
    }
  };
  visit(visit, TokenTrie::kRoot, 0, state);
  std::stable_sort(t.exits.begin(), t.exits.end(),
                   [](const TerminalTokens::Exit& a, const TerminalTokens::Exit& b) {
                     return a.state < b.state;
                   });
  return t;
}

// w.tops[level] / w.terminals[level] / w.ends[level]: the DFA state and terminal of each stack
// top of w.states[level], and whether only the end follows that terminal (kEndsUnknown until a
// walk needs it).
void VocabIndex::set_walk_base(const EbnfMatcher& m, GrammarWalk& w, size_t level) {
  const GrammarState& s = w.states[level];
  w.tops[level].clear();
  w.terminals[level].clear();
  w.ends[level].clear();
  for (size_t i = 0; i < s.ends.size(); ++i) {
    const GrammarFrame& top = s.frames[s.ends[i] - 1];
    w.tops[level].push_back(top.state);
    w.terminals[level].push_back(m.grammar().elements()[static_cast<size_t>(top.element)].arg);
    w.ends[level].push_back(kEndsUnknown);
  }
}

// Below `node` (its bytes end at `depth`): w.states[base] is the last state built in full, and
// w.tops[depth] its tops' DFA states after the bytes since (-1: that stack died). While every
// live top stays inside its terminal (no accepting state reached, or only the end follows it) a
// byte is one DFA step per stack; a top that reaches an accepting state may leave its terminal,
// so the state is then built in full from the base over the path's bytes and becomes the
// subtree's base.
void VocabIndex::walk(TokenTrie::NodeIndex node, size_t depth, size_t base, const EbnfMatcher& m,
                      std::span<uint32_t> bits, GrammarWalk& w) const {
  const EbnfGrammar& g = m.grammar();
  for (TokenTrie::NodeIndex child = node + 1; child < trie_.subtree_end(node);
       child = trie_.subtree_end(child)) {
    const uint8_t c = trie_.byte(child);
    w.path[depth] = c;
    const std::vector<int32_t>& terminals = w.terminals[base];
    w.budget.left -= static_cast<int64_t>(terminals.size());  // a DFA step per stack
    if (w.budget.spent()) return;
    std::vector<uint8_t>& ends = w.ends[base];
    std::vector<int32_t>& next = w.tops[depth + 1];
    next.resize(terminals.size());
    bool alive = false, leaves = false;
    for (size_t i = 0; i < terminals.size(); ++i) {
      const int32_t from = w.tops[depth][i];
      const int32_t to = from < 0 ? -1 : g.terminal(terminals[i]).next(from, c);
      next[i] = to;
      alive = alive || to >= 0;
      if (to < 0 || leaves || !g.terminal(terminals[i]).accepting(to)) continue;
      if (ends[i] == kEndsUnknown)
        ends[i] = m.only_end_follows(w.states[base], i, w.scratch, &w.budget);
      leaves = !ends[i];
    }
    if (!alive) continue;
    if (!leaves) {
      for (int32_t id : trie_.tokens_at(child)) set_mask_bit(bits, id);
      walk(child, depth + 1, base, m, bits, w);
      continue;
    }
    GrammarState& full = w.states[depth + 1];
    full = w.states[base];
    if (w.budget.spent()) return;
    if (!m.advance_bytes(
            full,
            std::string_view(reinterpret_cast<const char*>(w.path.data()) + base, depth + 1 - base),
            w.scratch, &w.budget))
      continue;
    for (int32_t id : trie_.tokens_at(child)) set_mask_bit(bits, id);
    if (full.ends.empty()) continue;  // a whole match that nothing may follow
    set_walk_base(m, w, depth + 1);
    walk(child, depth + 1, depth + 1, m, bits, w);
  }
}

// scratch.depth_states[depth] holds the live state after node's bytes.
void VocabIndex::walk(const TokenTrie& trie, TokenTrie::NodeIndex node, size_t depth,
                      const JsonMatcher& m, std::span<uint32_t> bits, MaskScratch& scratch) const {
  for (int32_t id : trie.tokens_at(node)) set_mask_bit(bits, id);
  for (TokenTrie::NodeIndex child = node + 1; child < trie.subtree_end(node);
       child = trie.subtree_end(child)) {
    if (m.advance(scratch.depth_states[depth], trie.byte(child), scratch.depth_states[depth + 1]))
      walk(trie, child, depth + 1, m, bits, scratch);
  }
}

}  // namespace beam
