#include "runtime/structured/ebnf_matcher.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/hash_set64.h"

namespace beam {
namespace {

using Kind = GrammarElement::Kind;

uint64_t stack_hash(const std::vector<GrammarFrame>& stack) {
  uint64_t h = 1469598103934665603ull;
  for (const GrammarFrame& f : stack) {
    h = (h ^ static_cast<uint32_t>(f.element)) * 1099511628211ull;
    h = (h ^ static_cast<uint32_t>(f.state)) * 1099511628211ull;
  }
  h ^= h >> 33;  // splitmix64's finalizer: FNV's low bits mix poorly
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

// Expands a working stack until every top sits on a terminal, adding the results to `out`
// (without duplicates); a stack whose root rule ends marks `out` complete. Past kMemoAfter steps
// a stack met before in this expansion is not expanded again (its results are in `out` already:
// nullable rules reach one configuration along many paths, exponentially many in their nesting);
// typical expansions end sooner and pay nothing for it. Each step spends one unit of `budget`
// (when given); none is taken once it is spent. The steps run from an explicit task stack in the
// order a recursive descent would take them: nested nullable rules chain millions of steps, which
// overflowed the thread's stack as recursion.
class Expander {
 public:
  Expander(const EbnfGrammar& g, GrammarState& out, ParseBudget* budget)
      : g_(g), out_(out), tasks_(out.tasks), budget_(budget) {}

  // `cur` ends as it began.
  void expand(std::vector<GrammarFrame>& cur) {
    using Task = GrammarExpandTask::Kind;
    tasks_.clear();
    visit(cur);
    while (!tasks_.empty()) {
      const GrammarExpandTask t = tasks_.back();
      tasks_.pop_back();
      switch (t.kind) {
        case Task::kVisit:
          visit(cur);
          break;
        case Task::kSetVisit:
          cur.back() = t.frame;
          visit(cur);
          break;
        case Task::kPushVisit:
          cur.push_back(t.frame);
          visit(cur);
          break;
        case Task::kSet:
          cur.back() = t.frame;
          break;
        case Task::kPush:
          cur.push_back(t.frame);
          break;
        case Task::kPop:
          cur.pop_back();
          break;
      }
    }
  }

 private:
  // One step on `cur`'s top: emits it, or changes `cur` and queues the steps that follow (the
  // last queued runs first) and those that undo the change after them.
  void visit(std::vector<GrammarFrame>& cur) {
    using Task = GrammarExpandTask::Kind;
    if (budget_ && --budget_->left < 0) return;
    if (++steps_ > kMemoAfter && !seen_.insert(stack_hash(cur))) return;
    const GrammarFrame top = cur.back();
    const GrammarElement& e = g_.elements()[static_cast<size_t>(top.element)];
    switch (e.kind) {
      case Kind::kTerminal:
        if (g_.terminal_continues(e.arg, top.state)) emit(cur);
        if (g_.terminal(e.arg).accepting(top.state)) {  // the parse may also leave it
          tasks_.push_back({Task::kSet, top});
          tasks_.push_back({Task::kSetVisit, {top.element + 1, 0}});
        }
        return;
      case Kind::kRule: {
        // The caller's frame waits at the next element, unless that ends its alternative (a
        // tail call: the callee returns straight to the caller's caller).
        const bool tail = g_.elements()[static_cast<size_t>(top.element) + 1].kind == Kind::kEnd;
        tasks_.push_back({tail ? Task::kPush : Task::kSet, top});
        if (tail)
          cur.pop_back();
        else
          cur.back() = {top.element + 1, 0};
        if (cur.size() < static_cast<size_t>(kMaxGrammarDepth)) {
          const std::vector<int32_t>& alts = g_.rules()[static_cast<size_t>(e.arg)].alternatives;
          for (auto alt = alts.rbegin(); alt != alts.rend(); ++alt) {
            tasks_.push_back({Task::kPop, {}});
            tasks_.push_back({Task::kPushVisit, {*alt, 0}});
          }
        }
        return;
      }
      case Kind::kEnd:
        tasks_.push_back({Task::kPush, top});
        cur.pop_back();
        if (cur.empty())
          out_.complete = true;
        else
          tasks_.push_back({Task::kVisit, {}});
        return;
    }
  }

  void emit(const std::vector<GrammarFrame>& cur) {
    if (out_.ends.size() >= static_cast<size_t>(kMaxGrammarStacks)) return;
    const uint64_t h = stack_hash(cur);
    for (size_t i = 0; i < out_.hashes.size(); ++i) {
      if (out_.hashes[i] != h) continue;
      const size_t begin = i == 0 ? 0 : out_.ends[i - 1];
      if (out_.ends[i] - begin == cur.size() && std::memcmp(out_.frames.data() + begin, cur.data(),
                                                            cur.size() * sizeof(GrammarFrame)) == 0)
        return;
    }
    out_.hashes.push_back(h);
    out_.frames.insert(out_.frames.end(), cur.begin(), cur.end());
    out_.ends.push_back(static_cast<uint32_t>(out_.frames.size()));
  }

  const EbnfGrammar& g_;
  GrammarState& out_;
  std::vector<GrammarExpandTask>& tasks_;
  static constexpr int64_t kMemoAfter = 256;
  ParseBudget* budget_;
  int64_t steps_ = 0;
  HashSet64 seen_;  // stacks expanded past kMemoAfter steps (by hash)
};

// cur = stack i of `in`, bottom first.
void copy_stack(const GrammarState& in, size_t i, std::vector<GrammarFrame>& cur) {
  const size_t begin = i == 0 ? 0 : in.ends[i - 1];
  cur.assign(in.frames.begin() + static_cast<std::ptrdiff_t>(begin),
             in.frames.begin() + in.ends[i]);
}

}  // namespace

EbnfMatcher::EbnfMatcher(std::shared_ptr<const EbnfGrammar> grammar)
    : grammar_(std::move(grammar)) {
  BEAM_CHECK(grammar_ != nullptr) << "a matcher needs a grammar";
}

GrammarState EbnfMatcher::initial(ParseBudget* budget) const {
  GrammarState out;
  Expander expander(*grammar_, out, budget);
  std::vector<GrammarFrame> cur;
  for (int32_t alt : grammar_->rules()[static_cast<size_t>(grammar_->root())].alternatives) {
    cur.assign(1, GrammarFrame{alt, 0});
    expander.expand(cur);
  }
  return out;
}

bool EbnfMatcher::advance(const GrammarState& in, uint8_t byte, GrammarState& out,
                          ParseBudget* budget) const {
  out.clear();
  Expander expander(*grammar_, out, budget);
  std::vector<GrammarFrame>& cur = out.work;
  for (size_t i = 0; i < in.ends.size(); ++i) {
    const GrammarFrame& top = in.frames[in.ends[i] - 1];
    const GrammarElement& e = grammar_->elements()[static_cast<size_t>(top.element)];
    const int32_t next = grammar_->terminal(e.arg).next(top.state, byte);
    if (next == ByteDfa::kDead) continue;
    copy_stack(in, i, cur);
    cur.back().state = next;
    expander.expand(cur);
  }
  return !out.dead();
}

void EbnfMatcher::resume(const GrammarState& in, size_t stack, int32_t dfa_state, GrammarState& out,
                         ParseBudget* budget) const {
  out.clear();
  Expander expander(*grammar_, out, budget);
  copy_stack(in, stack, out.work);
  out.work.back().state = dfa_state;
  expander.expand(out.work);
}

bool EbnfMatcher::only_end_follows(const GrammarState& in, size_t stack, GrammarState& scratch,
                                   ParseBudget* budget) const {
  scratch.clear();
  Expander expander(*grammar_, scratch, budget);
  copy_stack(in, stack, scratch.work);
  scratch.work.back() = {scratch.work.back().element + 1, 0};  // past the terminal
  expander.expand(scratch.work);
  return scratch.ends.empty();
}

bool EbnfMatcher::advance_bytes(GrammarState& state, std::string_view bytes, GrammarState& scratch,
                                ParseBudget* budget) const {
  if (bytes.empty()) return !state.dead();
  GrammarState cur = state;
  for (char c : bytes) {
    if (!advance(cur, static_cast<uint8_t>(c), scratch, budget)) return false;
    std::swap(cur, scratch);
  }
  state = std::move(cur);
  return true;
}

const std::vector<uint32_t>* GrammarMaskCache::find(const GrammarState& state) {
  std::vector<int32_t> key = mask_key(state);
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.get();
}

void GrammarMaskCache::insert(const GrammarState& state, std::vector<uint32_t> words) {
  std::vector<int32_t> key = mask_key(state);
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= kMaxEntries) return;
  entries_.try_emplace(std::move(key),
                       std::make_unique<const std::vector<uint32_t>>(std::move(words)));
}

const TerminalTokens* GrammarMaskCache::terminal_tokens(
    int32_t terminal, int32_t state, bool ends, const std::function<TerminalTokens()>& build) {
  const auto key = std::make_tuple(terminal, state, ends);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const auto it = terminals_.find(key); it != terminals_.end()) return it->second.get();
    if (terminals_.size() >= kMaxEntries) return nullptr;
  }
  // Built outside the lock (milliseconds): other sequences' lookups go on meanwhile; a build that
  // loses a race to the same key is dropped.
  auto built = std::make_unique<const TerminalTokens>(build());
  std::lock_guard<std::mutex> lock(mu_);
  return terminals_.try_emplace(key, std::move(built)).first->second.get();
}

std::vector<int32_t> GrammarMaskCache::mask_key(const GrammarState& state) {
  std::vector<int32_t> key;
  key.reserve(1 + state.ends.size() + 2 * state.frames.size());
  key.push_back(static_cast<int32_t>(state.ends.size()));
  for (uint32_t end : state.ends) key.push_back(static_cast<int32_t>(end));
  for (const GrammarFrame& f : state.frames) {
    key.push_back(f.element);
    key.push_back(f.state);
  }
  return key;
}

}  // namespace beam
