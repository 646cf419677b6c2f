// Scheduler::plan: decode pass, running-prefill pass and admission pass over a capacity ledger
// (free + evictable blocks of both pools, token budget), with preemption of the lowest-priority,
// newest running sequences when a pool runs out.
#include "runtime/scheduler/scheduler.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_map>

#include "core/check.h"

namespace beam {

int64_t StepPlan::num_tokens() const {
  int64_t n = 0;
  for (const SeqWork& w : work) n += w.num_tokens;
  return n;
}

Scheduler::Scheduler(const SchedulerConfig& config) : config_(config) {
  BEAM_CHECK(config.max_step_tokens > 0 && config.max_running_seqs > 0 &&
             config.max_prefill_chunk_tokens > 0 && config.admission_headroom_blocks_per_seq >= 0 &&
             config.prefix_lookahead_seqs >= 0 && config.max_logit_tokens_per_step > 0)
      << "invalid scheduler config";
}

std::span<const int32_t> reusable_tokens(const SeqState& s) {
  if (s.max_reused_tokens <= 0) return {};
  const auto len = static_cast<int64_t>(s.tokens.size());
  if (s.max_reused_tokens >= len) return s.tokens;
  // match() keeps the last token it is given for recompute: one past the reusable ones.
  return s.tokens.first(static_cast<size_t>(s.max_reused_tokens + 1));
}

PrefixMatch match_reusable(const PrefixCache& prefix, const SeqState& s) {
  return prefix.match(reusable_tokens(s), s.cache_salt);
}

namespace {

bool served_before(const SeqState& a, const SeqState& b) {
  return std::make_tuple(-static_cast<int64_t>(a.priority), a.arrival, a.id.value) <
         std::make_tuple(-static_cast<int64_t>(b.priority), b.arrival, b.id.value);
}

// One plan under construction.
class PlanBuilder {
 public:
  PlanBuilder(const SchedulerConfig& config, const SchedulerInput& in)
      : cfg_(config), in_(in), kv_(*in.kv), B_(in.kv->block_size()) {
    avail_ = kv_.free_blocks();
    if (in.prefix) avail_ += in.prefix->evictable();
    tokens_left_ = cfg_.max_step_tokens;
    logit_tokens_left_ = cfg_.max_logit_tokens_per_step;
    for (const SeqState& s : in.running) run_.push_back(Entry{&s});
    std::sort(run_.begin(), run_.end(),
              [](const Entry& a, const Entry& b) { return served_before(*a.s, *b.s); });
    for (size_t i = 0; i < run_.size(); ++i) index_[run_[i].s->id] = i;
    for (Entry& e : run_) {
      e.fork = e.s->fork_parent.valid();
      const SeqId kv_id = e.fork ? e.s->fork_parent : e.s->id;
      BEAM_CHECK(!e.fork || index_.count(kv_id)) << "fork parent " << kv_id.value << " not running";
      e.num_computed = kv_.num_computed(kv_id);
      e.remaining = static_cast<int64_t>(e.s->tokens.size()) - e.num_computed;
      // remaining == 0: a finished parent kept only until its pending fork children are forked.
      BEAM_CHECK(e.remaining >= 0) << "running sequence " << e.s->id.value << " computed past its tokens";
      BEAM_CHECK(e.s->num_draft_tokens == 0 ||
                 (!e.fork && e.remaining == 1 + e.s->num_draft_tokens))
          << "sequence " << e.s->id.value << " has drafts but is not decoding";
    }
  }

  StepPlan build() {
    decode_pass();
    prefill_pass();
    admit_pass();
    return std::move(plan_);
  }

 private:
  struct Entry {
    const SeqState* s = nullptr;
    int64_t num_computed = 0;
    int64_t remaining = 0;
    bool fork = false;
    bool preempted = false;
    bool scheduled = false;
    bool pinned = false;  // parent of a fork planned this step: must stay
    bool held = false;    // parent of a fork deferred this step: must not advance
  };

  void preempt(size_t v) {
    Entry& e = run_[v];
    e.preempted = true;
    if (!e.fork) {  // what its release frees or makes evictable
      avail_ += kv_.exclusive_blocks(e.s->id);
      if (in_.prefix) avail_ += in_.prefix->blocks_locked_only_by(e.s->id);
      released_.push_back(e.s->id);
    }
    plan_.preempted.push_back(Preemption{e.s->id, e.s->tokens});
    for (Entry& c : run_)  // pending fork children cannot outlive their parent
      if (c.fork && !c.preempted && c.s->fork_parent == e.s->id) {
        c.preempted = true;
        plan_.preempted.push_back(Preemption{c.s->id, c.s->tokens});
      }
  }

  // Preempts the lowest-priority, newest running sequence served after `self`; false if none.
  bool preempt_lowest_after(size_t self) {
    for (size_t v = run_.size(); v-- > self + 1;) {
      const Entry& e = run_[v];
      if (e.preempted || e.scheduled || e.pinned) continue;
      preempt(v);
      return true;
    }
    return false;
  }

  void schedule(size_t i, WorkKind kind, int64_t num_tokens, const BlockCounts& need) {
    Entry& e = run_[i];
    e.scheduled = true;
    avail_ -= need;
    tokens_left_ -= num_tokens;
    if (e.s->logits_every_token && kind == WorkKind::kPrefill) logit_tokens_left_ -= num_tokens;
    plan_.new_blocks += need;
    const bool samples = kind == WorkKind::kDecode || num_tokens == e.remaining;
    plan_.work.push_back(SeqWork{e.s->id, e.s->tokens, kind, e.num_computed, num_tokens, samples});
  }

  // Blocks a decode of `width` tokens needs (fork children: the fork copy plus their growth).
  BlockCounts decode_need(const Entry& e, int64_t width) const {
    if (!e.fork) return kv_.blocks_needed(e.s->id, e.num_computed + width);
    const int64_t more =
        blocks_for_tokens(e.num_computed + width, B_) - blocks_for_tokens(e.num_computed, B_);
    return kv_.fork_cost(e.s->fork_parent) + BlockCounts{more, more};
  }

  // Schedules the decode of entry i (width tokens: 1 + drafts), preempting lower entries if a
  // pool lacks room; drafts are dropped before anything is preempted for them. Entries that must
  // stay (fork children, pinned or held parents) wait for room instead of preempting themselves.
  // Returns whether it was scheduled.
  bool try_decode(size_t i, int64_t width) {
    Entry& e = run_[i];
    BlockCounts need = decode_need(e, width);
    if (width > 1 && !need.fits_in(avail_)) need = decode_need(e, width = 1);
    while (!need.fits_in(avail_) && !e.preempted) {
      if (preempt_lowest_after(i)) continue;
      if (e.fork || e.pinned || e.held) return false;
      preempt(i);
    }
    if (e.preempted) return false;
    schedule(i, WorkKind::kDecode, width, need);
    return true;
  }

  void decode_pass() {
    // Pending fork children first: their parent may not advance past the shared prompt before
    // they are forked, so a parent with a child deferred for budget is held back this step. A
    // child that does not fit the pools goes back to the waiting queue as an ordinary sequence
    // (its prompt comes back through the prefix cache) instead of stalling its parent.
    for (size_t i = 0; i < run_.size(); ++i) {
      Entry& e = run_[i];
      if (!e.fork || e.preempted) continue;
      BEAM_CHECK_EQ(e.remaining, 1) << "fork child " << e.s->id.value << " of an advanced parent";
      Entry& parent = run_[index_.at(e.s->fork_parent)];
      if (tokens_left_ < 1) {
        parent.held = true;
      } else if (try_decode(i, 1)) {
        plan_.forks.push_back(ForkOp{e.s->fork_parent, e.s->id, parent.s->tokens});
        parent.pinned = true;
      } else if (!e.preempted) {
        preempt(i);
      }
    }
    for (size_t i = 0; i < run_.size(); ++i) {
      const Entry& e = run_[i];
      if (e.preempted || e.fork || e.held || e.remaining != 1 + e.s->num_draft_tokens ||
          tokens_left_ < 1)
        continue;
      try_decode(i, std::min(e.remaining, tokens_left_));
    }
  }

  // Largest chunk <= want whose new blocks fit avail_ (0 if not even one token fits).
  int64_t fitting_chunk(const Entry& e, int64_t want) const {
    const int64_t held = static_cast<int64_t>(kv_.full_table(e.s->id).size());
    const int64_t cap = (held + std::min(avail_.full, avail_.sliding)) * B_ - e.num_computed;
    return std::max<int64_t>(0, std::min(want, cap));
  }

  void prefill_pass() {
    for (size_t i = 0; i < run_.size(); ++i) {
      Entry& e = run_[i];
      if (e.preempted || e.scheduled || e.fork || e.remaining <= 1 || e.s->num_draft_tokens > 0)
        continue;
      const int64_t total_blocks = blocks_for_tokens(e.num_computed + e.remaining, B_);
      const int64_t want =
          std::min({e.remaining, tokens_left_, cfg_.max_prefill_chunk_tokens, chunk_limit(*e.s)});
      int64_t chunk = 0;
      while (want > 0 && (chunk = fitting_chunk(e, want)) == 0 && !e.preempted)
        if (!preempt_lowest_after(i)) preempt(i);
      const int64_t held = static_cast<int64_t>(kv_.full_table(e.s->id).size());
      if (e.preempted) continue;
      if (chunk > 0)
        schedule(i, WorkKind::kPrefill, chunk, kv_.blocks_needed(e.s->id, e.num_computed + chunk));
      outstanding_full_ +=
          total_blocks - std::max(held, blocks_for_tokens(e.num_computed + chunk, B_));
    }
  }

  // The most prefill tokens `s` may take this step beyond the token budget: its logits rows.
  int64_t chunk_limit(const SeqState& s) const {
    return s.logits_every_token ? logit_tokens_left_ : std::numeric_limits<int64_t>::max();
  }

  int64_t num_running() const {
    int64_t n = 0;
    for (const Entry& e : run_) n += !e.preempted;
    return n + static_cast<int64_t>(plan_.admitted.size());
  }

  // True when the sequence could not be admitted even with both pools to itself (its prompt,
  // one generated token and the admission headroom).
  bool never_fits(int64_t len) const {
    const BlockCounts total = kv_.total_blocks();
    const int64_t headroom = cfg_.admission_headroom_blocks_per_seq;
    return blocks_for_tokens(len + 1, B_) + headroom > total.full ||
           blocks_for_tokens(kv_.sliding_window() - 1, B_) + 2 + headroom > total.sliding;
  }

  bool try_admit(const SeqState& w) {
    const int64_t len = static_cast<int64_t>(w.tokens.size());
    BEAM_CHECK(len >= 1) << "waiting sequence " << w.id.value << " has no tokens";
    const PrefixMatch match = in_.prefix ? match_reusable(*in_.prefix, w) : PrefixMatch{};
    const BlockCounts relocked = in_.prefix ? in_.prefix->newly_locked(match, released_) : BlockCounts{};
    const int64_t P = match.num_tokens;
    const int64_t headroom = cfg_.admission_headroom_blocks_per_seq * (num_running() + 1);
    // The first chunk is cut to the sliding pool's room; later chunks reuse the blocks that
    // slide out behind it. The full pool must hold the whole prompt.
    const int64_t sliding_room = avail_.sliding - relocked.sliding - headroom;
    const int64_t chunk = std::min({len - P, tokens_left_, cfg_.max_prefill_chunk_tokens,
                                    chunk_limit(w), (P / B_ + sliding_room) * B_ - P});
    if (chunk <= 0) return false;
    const int64_t more = blocks_for_tokens(P + chunk, B_) - P / B_;
    const BlockCounts need{more, more};
    const BlockCounts after = avail_ - relocked - need;
    const int64_t rest_full = blocks_for_tokens(len, B_) - blocks_for_tokens(P + chunk, B_);
    if (after.full < outstanding_full_ + rest_full + headroom) return false;
    avail_ = after;
    outstanding_full_ += rest_full;
    tokens_left_ -= chunk;
    if (w.logits_every_token) logit_tokens_left_ -= chunk;
    plan_.new_blocks += need;
    plan_.admitted.push_back(Admission{w.id, match, w.cache_salt, w.max_cached_tokens});
    plan_.work.push_back(SeqWork{w.id, w.tokens, WorkKind::kPrefill, P, chunk, P + chunk == len});
    return true;
  }

  void admit_pass() {
    const std::span<const SeqState> order = in_.waiting;  // the engine's queue order
    size_t next = 0;
    for (; next < order.size(); ++next) {
      const SeqState* w = &order[next];
      if (never_fits(static_cast<int64_t>(w->tokens.size()))) {
        plan_.rejected.push_back(w->id);
        continue;
      }
      if (num_running() >= cfg_.max_running_seqs || tokens_left_ <= 0) break;
      if (!try_admit(*w)) break;  // head of line: later ones wait too
    }
    // Look ahead: the cached prefixes of the next waiting sequences are what eviction should
    // keep (they are about to be used), as far as the step allows.
    if (in_.prefix == nullptr) return;
    for (int64_t n = 0; next < order.size() && n < cfg_.prefix_lookahead_seqs; ++next, ++n) {
      const PrefixMatch m = match_reusable(*in_.prefix, order[next]);
      if (m.num_tokens > 0) plan_.protect.push_back(m.endpoint);
    }
  }

  const SchedulerConfig& cfg_;
  const SchedulerInput& in_;
  const KvCacheManager& kv_;
  const int64_t B_;
  std::vector<Entry> run_;
  std::unordered_map<SeqId, size_t> index_;
  std::vector<SeqId> released_;  // preempted sequences that held KV
  BlockCounts avail_;
  int64_t tokens_left_ = 0;
  int64_t logit_tokens_left_ = 0;  // of SchedulerConfig::max_logit_tokens_per_step
  int64_t outstanding_full_ = 0;  // blocks running prefills still need for their prompts
  StepPlan plan_;
};

}  // namespace

StepPlan Scheduler::plan(const SchedulerInput& input) const {
  BEAM_CHECK(input.kv != nullptr) << "scheduler input without KV cache";
  return PlanBuilder(config_, input).build();
}

}  // namespace beam
