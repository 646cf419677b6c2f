// ByteDfa::from_pattern: regex tree (regex_syntax.h) → Thompson NFA over bytes (code point sets
// as their UTF-8 sequences, utf8_ranges.h) → DFA by subset construction over byte classes →
// trimmed to the states that can still reach a match.
#include "runtime/structured/byte_dfa.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>

#include "runtime/structured/regex_syntax.h"
#include "runtime/structured/utf8_ranges.h"

namespace beam {
// Named, not anonymous: beam::DfaBuilder (ByteDfa's friend) holds an Nfa, and gcc warns
// (-Wsubobject-linkage) when a class outside the main file of a unity batch does that.
namespace regex_nfa {

struct NfaState {
  std::vector<int32_t> eps;
  ByteRange on{};  // the one byte transition, when `to` >= 0
  int32_t to = -1;
};

struct Fragment {
  int32_t start = 0, end = 0;  // end has no transitions yet
};

class Nfa {
 public:
  std::vector<NfaState> states;
  bool too_large = false;

  int32_t add() {
    if (states.size() >= static_cast<size_t>(kMaxPatternNfaStates)) {
      too_large = true;
      return 0;  // the caller stops on too_large; state 0 keeps indices valid meanwhile
    }
    states.emplace_back();
    return static_cast<int32_t>(states.size() - 1);
  }
  void eps(int32_t from, int32_t to) {
    if (!too_large) states[static_cast<size_t>(from)].eps.push_back(to);
  }

  Fragment build(const RegexNode& n) {
    if (too_large) return {};
    switch (n.kind) {
      case RegexNode::Kind::kSet:
        return set(n.set);
      case RegexNode::Kind::kConcat: {
        Fragment f = empty();
        for (const RegexNode& c : n.children) {
          const Fragment next = build(c);
          eps(f.end, next.start);
          f.end = next.end;
        }
        return f;
      }
      case RegexNode::Kind::kAlternate: {
        const Fragment f{add(), add()};
        for (const RegexNode& c : n.children) {
          const Fragment alt = build(c);
          eps(f.start, alt.start);
          eps(alt.end, f.end);
        }
        return f;
      }
      case RegexNode::Kind::kRepeat:
        return repeat(n.children[0], n.min, n.max);
      case RegexNode::Kind::kEmpty:
      case RegexNode::Kind::kStart:
      case RegexNode::Kind::kEnd:
        return empty();
    }
    return empty();
  }

 private:
  Fragment empty() {
    const int32_t s = add();
    return {s, s};
  }

  Fragment set(const std::vector<CodePointRange>& ranges) {
    const Fragment f{add(), add()};
    for (const CodePointRange& r : ranges) {
      for (const Utf8Sequence& seq : utf8_sequences(r.lo, r.hi)) {
        int32_t at = add();
        eps(f.start, at);
        for (size_t i = 0; i < seq.size() && !too_large; ++i) {
          const int32_t to = i + 1 == seq.size() ? f.end : add();
          if (too_large) break;
          states[static_cast<size_t>(at)].on = seq[i];
          states[static_cast<size_t>(at)].to = to;
          at = to;
        }
      }
    }
    return f;
  }

  // min copies, then either a loop (max -1) or max - min optional copies.
  Fragment repeat(const RegexNode& child, int32_t min, int32_t max) {
    Fragment f = empty();
    for (int32_t i = 0; i < min && !too_large; ++i) {
      const Fragment c = build(child);
      eps(f.end, c.start);
      f.end = c.end;
    }
    if (max < 0) {
      const int32_t loop = add();
      const Fragment c = build(child);
      eps(f.end, loop);
      eps(loop, c.start);
      eps(c.end, loop);
      f.end = add();
      eps(loop, f.end);
      return f;
    }
    const int32_t out = add();
    for (int32_t i = min; i < max && !too_large; ++i) {
      const Fragment c = build(child);
      eps(f.end, out);  // stop here
      eps(f.end, c.start);
      f.end = c.end;
    }
    eps(f.end, out);
    f.end = out;
    return f;
  }
};

}  // namespace regex_nfa

namespace {

// The error of a build past a limit: "the regular expression is too complex (<what>)".
Error too_complex(const std::string& what) {
  return make_error("the regular expression is too complex (" + what + ")");
}

// What a build past its own step bound, or past a shared budget's steps, says.
std::string own_steps_spent() {
  return "its automaton takes more than " + std::to_string(kMaxPatternBuildSteps) +
         " steps to build";
}
std::string shared_steps_spent() {
  return "the regular expressions together take more than " + std::to_string(kMaxSharedBuildSteps) +
         " steps to build";
}
// What a build says once a shared budget is spent, by which of its limits.
std::string shared_budget_spent(const DfaBuildBudget& budget) {
  if (budget.steps_left <= 0) return shared_steps_spent();
  return "the regular expressions together pass " + std::to_string(kMaxSharedTableBytes >> 20) +
         " MiB of automata";
}

// Each top-level alternative anchored as JSON Schema reads a pattern: an unanchored side may have
// any text before / after the match (search); for a full match only the anchors go.
RegexNode anchored(RegexNode root, bool search) {
  const RegexNode any_text{.kind = RegexNode::Kind::kRepeat,
                           .children = {RegexNode{.kind = RegexNode::Kind::kSet,
                                                  .set = {{0, 0xD7FF}, {0xE000, kMaxCodePoint}}}},
                           .min = 0,
                           .max = -1};
  for (RegexNode& branch : root.children) {
    std::vector<RegexNode>& items = branch.children;
    const bool from_start = !items.empty() && items.front().kind == RegexNode::Kind::kStart;
    const bool to_end = !items.empty() && items.back().kind == RegexNode::Kind::kEnd;
    if (to_end) items.pop_back();
    if (from_start) items.erase(items.begin());
    if (!search) continue;
    if (!from_start) items.insert(items.begin(), any_text);
    if (!to_end) items.push_back(any_text);
  }
  return root;
}

}  // namespace

class DfaBuilder {
 public:
  static Expected<std::shared_ptr<const ByteDfa>> build(const regex_nfa::Nfa& nfa,
                                                        regex_nfa::Fragment whole,
                                                        DfaBuildBudget* budget) {
    const bool shared_binds = budget && budget->steps_left < kMaxPatternBuildSteps;
    DfaBuilder b(nfa, whole.end,
                 shared_binds ? std::max<int64_t>(budget->steps_left, 0) : kMaxPatternBuildSteps,
                 shared_binds ? shared_steps_spent() : own_steps_spent());
    auto dfa = b.run(whole.start);
    if (budget) budget->steps_left -= b.steps_;
    return dfa;
  }

 private:
  DfaBuilder(const regex_nfa::Nfa& nfa, int32_t accept, int64_t max_steps, std::string too_long)
      : nfa_(nfa),
        accept_(accept),
        mark_(nfa.states.size(), 0),
        max_steps_(max_steps),
        too_long_(std::move(too_long)) {}

  // A DFA state's key: the states of its epsilon closure that matter to what follows — those
  // with a byte transition, and the accepting one — sorted. Closures that differ only in
  // epsilon-only states behave alike, so they share a DFA state.
  struct KernelHash {
    size_t operator()(const std::vector<int32_t>& set) const {
      uint64_t h = 1469598103934665603ull;
      for (int32_t s : set) h = (h ^ static_cast<uint32_t>(s)) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };

  // The kernel of the states reachable from `set` over epsilon moves; false once the build has
  // spent its steps.
  bool closure(const std::vector<int32_t>& set, std::vector<int32_t>& kernel) {
    if (++stamp_ == 0) {  // wrapped: clear the marks once
      std::fill(mark_.begin(), mark_.end(), 0);
      stamp_ = 1;
    }
    kernel.clear();
    std::vector<int32_t>& stack = stack_;
    stack.clear();
    for (int32_t s : set) {
      if (mark_[static_cast<size_t>(s)] == stamp_) continue;
      mark_[static_cast<size_t>(s)] = stamp_;
      stack.push_back(s);
    }
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      const regex_nfa::NfaState& st = nfa_.states[static_cast<size_t>(s)];
      steps_ += 1 + static_cast<int64_t>(st.eps.size());
      if (st.to >= 0 || s == accept_) kernel.push_back(s);
      for (int32_t t : st.eps) {
        if (mark_[static_cast<size_t>(t)] == stamp_) continue;
        mark_[static_cast<size_t>(t)] = stamp_;
        stack.push_back(t);
      }
    }
    std::sort(kernel.begin(), kernel.end());
    return steps_ <= max_steps_;
  }

  Expected<std::shared_ptr<const ByteDfa>> run(int32_t start) {
    std::shared_ptr<ByteDfa> dfa(new ByteDfa());
    // Byte classes: bytes no transition tells apart.
    std::array<bool, 257> cut{};
    for (const regex_nfa::NfaState& s : nfa_.states) {
      if (s.to < 0) continue;
      cut[s.on.lo] = true;
      cut[static_cast<size_t>(s.on.hi) + 1] = true;
    }
    size_t classes = 0;
    for (int b = 0; b < 256; ++b) {
      if (b == 0 || cut[static_cast<size_t>(b)]) ++classes;
      dfa->class_of_[static_cast<size_t>(b)] = static_cast<uint8_t>(classes - 1);
    }
    dfa->num_classes_ = classes;

    // Interned kernels: `ids` points into `sets` (a deque: its elements never move).
    std::unordered_map<std::vector<int32_t>, int32_t, KernelHash> ids;
    std::deque<std::vector<int32_t>> sets;
    std::vector<int32_t> kernel;
    auto intern = [&](const std::vector<int32_t>& k) -> int32_t {
      const auto [it, fresh] = ids.try_emplace(k, static_cast<int32_t>(sets.size()));
      if (fresh) sets.push_back(k);
      return it->second;
    };
    if (!closure({start}, kernel)) return too_complex(too_long_);
    intern(kernel);
    std::vector<int32_t> next;
    std::vector<std::vector<int32_t>> moved(classes);  // the states each class leads to
    for (size_t d = 0; d < sets.size(); ++d) {
      if (sets.size() > static_cast<size_t>(kMaxPatternDfaStates))
        return too_complex("more than " + std::to_string(kMaxPatternDfaStates) +
                           " automaton states");
      for (std::vector<int32_t>& m : moved) m.clear();
      for (int32_t s : sets[d]) {
        const regex_nfa::NfaState& st = nfa_.states[static_cast<size_t>(s)];
        if (st.to < 0) continue;
        const size_t last = dfa->class_of_[st.on.hi];
        for (size_t c = dfa->class_of_[st.on.lo]; c <= last; ++c) moved[c].push_back(st.to);
        steps_ += static_cast<int64_t>(last - dfa->class_of_[st.on.lo] + 1);
      }
      for (size_t c = 0; c < classes; ++c) {
        if (moved[c].empty()) {
          next.push_back(ByteDfa::kDead);
          continue;
        }
        if (!closure(moved[c], kernel)) return too_complex(too_long_);
        next.push_back(intern(kernel));
      }
    }
    const size_t n = sets.size();
    std::vector<uint8_t> accepting(n, 0);
    for (size_t d = 0; d < n; ++d)
      accepting[d] = std::binary_search(sets[d].begin(), sets[d].end(), accept_) ? 1 : 0;
    return trimmed(std::move(dfa), next, accepting);
  }

 public:
  // dfa (its byte classes set) with the table `next` [states, classes] and `accepting`, keeping
  // the states from which a match is still reachable (renumbered in order; state 0 the start).
  static Expected<std::shared_ptr<const ByteDfa>> trimmed(std::shared_ptr<ByteDfa> dfa,
                                                          const std::vector<int32_t>& next,
                                                          const std::vector<uint8_t>& accepting) {
    const size_t n = accepting.size(), classes = dfa->num_classes_;
    // A backward search from the accepting states over the reversed transitions.
    std::vector<std::vector<int32_t>> into(n);
    for (size_t d = 0; d < n; ++d)
      for (size_t c = 0; c < classes; ++c)
        if (const int32_t t = next[d * classes + c]; t != ByteDfa::kDead)
          into[static_cast<size_t>(t)].push_back(static_cast<int32_t>(d));
    std::vector<uint8_t> live = accepting;
    std::vector<int32_t> work;
    for (size_t d = 0; d < n; ++d)
      if (live[d]) work.push_back(static_cast<int32_t>(d));
    while (!work.empty()) {
      const int32_t t = work.back();
      work.pop_back();
      for (int32_t d : into[static_cast<size_t>(t)])
        if (!live[static_cast<size_t>(d)]) {
          live[static_cast<size_t>(d)] = 1;
          work.push_back(d);
        }
    }
    if (!live[0]) return make_error("the regular expression matches no string");
    std::vector<int32_t> renumber(n, ByteDfa::kDead);
    int32_t kept = 0;
    for (size_t d = 0; d < n; ++d)
      if (live[d]) renumber[d] = kept++;
    for (size_t d = 0; d < n; ++d) {
      if (!live[d]) continue;
      dfa->accepting_.push_back(accepting[d]);
      for (size_t c = 0; c < classes; ++c) {
        const int32_t t = next[d * classes + c];
        dfa->next_.push_back(t == ByteDfa::kDead ? t : renumber[static_cast<size_t>(t)]);
      }
    }
    set_min_code_points(*dfa);
    return std::shared_ptr<const ByteDfa>(std::move(dfa));
  }

  // A 0-1 breadth-first search backward from the accepting states: a lead byte (not 0x80-0xBF)
  // costs one code point, a continuation byte none. Every state reaches a match (trimmed), so all
  // end finite.
  static void set_min_code_points(ByteDfa& dfa) {
    const size_t n = dfa.accepting_.size(), classes = dfa.num_classes_;
    std::vector<uint8_t> lead(classes, 0), continuation(classes, 0);
    for (int b = 0; b < 256; ++b) {
      const bool cont = b >= 0x80 && b <= 0xBF;
      (cont ? continuation : lead)[dfa.class_of_[static_cast<size_t>(b)]] = 1;
    }
    // (from, cost) of each transition into a state; a class holding lead bytes costs one, one of
    // only continuation bytes none.
    std::vector<std::vector<std::pair<int32_t, int32_t>>> into(n);
    for (size_t d = 0; d < n; ++d)
      for (size_t c = 0; c < classes; ++c)
        if (const int32_t t = dfa.next_[d * classes + c]; t != ByteDfa::kDead)
          into[static_cast<size_t>(t)].emplace_back(static_cast<int32_t>(d),
                                                    lead[c] && !continuation[c] ? 1 : 0);
    constexpr int32_t kFar = 1 << 30;
    std::vector<int32_t>& best = dfa.min_code_points_;
    best.assign(n, kFar);
    std::deque<int32_t> queue;
    for (size_t d = 0; d < n; ++d)
      if (dfa.accepting_[d]) {
        best[d] = 0;
        queue.push_back(static_cast<int32_t>(d));
      }
    while (!queue.empty()) {
      const int32_t t = queue.front();
      queue.pop_front();
      for (const auto& [d, cost] : into[static_cast<size_t>(t)]) {
        const int32_t via = best[static_cast<size_t>(t)] + cost;
        if (via >= best[static_cast<size_t>(d)]) continue;
        best[static_cast<size_t>(d)] = via;
        if (cost == 0)
          queue.push_front(d);
        else
          queue.push_back(d);
      }
    }
  }

 private:
  const regex_nfa::Nfa& nfa_;
  int32_t accept_;
  std::vector<uint32_t> mark_;  // closure(): == stamp_ when visited in the current call
  uint32_t stamp_ = 0;
  std::vector<int32_t> stack_;
  int64_t steps_ = 0;  // NFA states and edges visited so far
  int64_t max_steps_;  // past it the build fails with too_long_
  std::string too_long_;
};

Expected<std::shared_ptr<const ByteDfa>> ByteDfa::intersect(const ByteDfa& a, const ByteDfa& b) {
  std::shared_ptr<ByteDfa> dfa(new ByteDfa());
  // A class per pair of classes some byte has.
  std::map<std::pair<uint8_t, uint8_t>, uint8_t> pair_class;
  std::vector<uint8_t> representative;
  for (int byte = 0; byte < 256; ++byte) {
    const std::pair<uint8_t, uint8_t> key{a.class_of_[static_cast<size_t>(byte)],
                                          b.class_of_[static_cast<size_t>(byte)]};
    auto [it, fresh] = pair_class.emplace(key, static_cast<uint8_t>(representative.size()));
    if (fresh) representative.push_back(static_cast<uint8_t>(byte));
    dfa->class_of_[static_cast<size_t>(byte)] = it->second;
  }
  const size_t classes = representative.size();
  dfa->num_classes_ = classes;
  std::map<std::pair<int32_t, int32_t>, int32_t> ids;
  std::vector<std::pair<int32_t, int32_t>> states;
  auto intern = [&](std::pair<int32_t, int32_t> st) {
    auto [it, fresh] = ids.emplace(st, static_cast<int32_t>(states.size()));
    if (fresh) states.push_back(st);
    return it->second;
  };
  intern({a.start(), b.start()});
  std::vector<int32_t> next;
  std::vector<uint8_t> accepting;
  for (size_t d = 0; d < states.size(); ++d) {
    if (states.size() > static_cast<size_t>(kMaxPatternDfaStates))
      return make_error("the regular expressions together are too complex (more than " +
                        std::to_string(kMaxPatternDfaStates) + " automaton states)");
    const auto [sa, sb] = states[d];
    accepting.push_back(a.accepting(sa) && b.accepting(sb) ? 1 : 0);
    for (size_t c = 0; c < classes; ++c) {
      const int32_t ta = a.next(sa, representative[c]), tb = b.next(sb, representative[c]);
      next.push_back(ta == kDead || tb == kDead ? kDead : intern({ta, tb}));
    }
  }
  return DfaBuilder::trimmed(std::move(dfa), next, accepting);
}

Expected<std::shared_ptr<const ByteDfa>> ByteDfa::from_literals(
    std::span<const std::string> texts) {
  if (texts.empty()) return make_error("no strings to match");
  std::shared_ptr<ByteDfa> dfa(new ByteDfa());
  // A class per byte some text uses; the others share class 0, dead everywhere (when a byte is
  // left over: 256 used bytes need all 256 classes).
  std::array<bool, 256> used{};
  for (const std::string& t : texts)
    for (unsigned char c : t) used[c] = true;
  const bool all_used = std::all_of(used.begin(), used.end(), [](bool u) { return u; });
  size_t classes = all_used ? 0 : 1;
  for (size_t b = 0; b < 256; ++b)
    if (used[b]) dfa->class_of_[b] = static_cast<uint8_t>(classes++);
  dfa->num_classes_ = classes;
  std::vector<int32_t> next(classes, kDead);  // [states, classes]; state 0 the empty prefix
  std::vector<uint8_t> accepting(1, 0);
  const size_t max_states = kMaxLiteralDfaTableBytes / (classes * sizeof(int32_t));
  for (const std::string& t : texts) {
    size_t state = 0;
    for (unsigned char c : t) {
      const size_t slot = state * classes + dfa->class_of_[c];
      if (next[slot] == kDead) {
        if (accepting.size() >= max_states)
          return make_error("the strings need more than " +
                            std::to_string(kMaxLiteralDfaTableBytes >> 20) +
                            " MiB of automaton table");
        next[slot] = static_cast<int32_t>(accepting.size());
        accepting.push_back(0);
        next.resize(next.size() + classes, kDead);
      }
      state = static_cast<size_t>(next[slot]);
    }
    accepting[state] = 1;
  }
  return DfaBuilder::trimmed(std::move(dfa), next, accepting);
}

Expected<std::shared_ptr<const ByteDfa>> ByteDfa::from_table(
    const std::vector<int32_t>& next, const std::vector<uint8_t>& accepting) {
  const size_t n = accepting.size();
  std::shared_ptr<ByteDfa> dfa(new ByteDfa());
  // Bytes grouped by their column (the state each state goes to on them): hashed, then compared
  // with the class representative of the same hash.
  std::map<uint64_t, std::vector<uint8_t>> by_hash;  // column hash → representatives
  std::vector<uint8_t> representative;
  auto same_column = [&](uint8_t a, uint8_t b) {
    for (size_t d = 0; d < n; ++d)
      if (next[d * 256 + a] != next[d * 256 + b]) return false;
    return true;
  };
  for (int b = 0; b < 256; ++b) {
    uint64_t h = 1469598103934665603ull;
    for (size_t d = 0; d < n; ++d)
      h = (h ^ static_cast<uint32_t>(next[d * 256 + static_cast<size_t>(b)])) * 1099511628211ull;
    std::vector<uint8_t>& reps = by_hash[h];
    size_t cls = representative.size();
    for (uint8_t r : reps)
      if (same_column(r, static_cast<uint8_t>(b))) cls = dfa->class_of_[r];
    if (cls == representative.size()) {
      representative.push_back(static_cast<uint8_t>(b));
      reps.push_back(static_cast<uint8_t>(b));
    }
    dfa->class_of_[static_cast<size_t>(b)] = static_cast<uint8_t>(cls);
  }
  const size_t classes = representative.size();
  dfa->num_classes_ = classes;
  std::vector<int32_t> compact(n * classes);
  for (size_t d = 0; d < n; ++d)
    for (size_t c = 0; c < classes; ++c)
      compact[d * classes + c] = next[d * 256 + representative[c]];
  return DfaBuilder::trimmed(std::move(dfa), compact, accepting);
}

namespace {

// The NFA's states count against `budget` too (building one costs about a step a state), and
// the built table against its bytes.
Expected<std::shared_ptr<const ByteDfa>> build_dfa(const RegexNode& root, DfaBuildBudget* budget) {
  if (budget && budget->spent()) return too_complex(shared_budget_spent(*budget));
  regex_nfa::Nfa nfa;
  const regex_nfa::Fragment whole = nfa.build(root);
  if (budget) budget->steps_left -= static_cast<int64_t>(nfa.states.size());
  if (nfa.too_large)
    return too_complex("more than " + std::to_string(kMaxPatternNfaStates) +
                       " automaton states before determinizing");
  if (budget && budget->steps_left <= 0) return too_complex(shared_steps_spent());
  BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const ByteDfa> dfa, DfaBuilder::build(nfa, whole, budget));
  if (!budget) return dfa;
  budget->bytes_left -= static_cast<int64_t>(dfa->table_bytes());
  if (budget->bytes_left < 0) return too_complex(shared_budget_spent(*budget));
  return dfa;
}

Expected<std::shared_ptr<const ByteDfa>> compile(std::string_view pattern, bool search,
                                                 DfaBuildBudget* budget) {
  BEAM_ASSIGN_OR_RETURN(RegexNode root, parse_regex(pattern));
  return build_dfa(anchored(std::move(root), search), budget);
}

}  // namespace

Expected<std::shared_ptr<const ByteDfa>> ByteDfa::from_regex(const RegexNode& root,
                                                             DfaBuildBudget* budget) {
  return build_dfa(root, budget);
}

Expected<std::shared_ptr<const ByteDfa>> ByteDfa::from_pattern(std::string_view pattern,
                                                               DfaBuildBudget* budget) {
  return compile(pattern, /*search=*/true, budget);
}

Expected<std::shared_ptr<const ByteDfa>> ByteDfa::from_full_match(std::string_view pattern,
                                                                  DfaBuildBudget* budget) {
  return compile(pattern, /*search=*/false, budget);
}

}  // namespace beam
