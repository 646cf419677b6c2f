// SimEngine: a model-free engine loop for the runtime_kv tests.
#include "sim_engine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/check.h"

namespace beam::testing {

SimEngine::SimEngine(const KvCacheConfig& kv_config, const SchedulerConfig& sched_config,
                     bool prefix_cache, int64_t checkpoint_interval_tokens)
    : scheduler_(sched_config) {
  Expected<KvCacheManager> kv = KvCacheManager::create(kv_config);
  BEAM_CHECK(kv.ok()) << kv.error().message;
  kv_ = std::make_unique<KvCacheManager>(std::move(kv).value());
  if (prefix_cache)
    prefix_ = std::make_unique<PrefixCache>(*kv_, PrefixCacheConfig{checkpoint_interval_tokens});
}

int32_t SimEngine::generated_token(SeqId id, int64_t position) {
  uint64_t x = static_cast<uint64_t>(id.value) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(position);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return static_cast<int32_t>(100000 + (x >> 40) % 50000);
}

SeqId SimEngine::submit(std::vector<int32_t> prompt, int64_t max_new, int32_t priority,
                        int32_t num_forks) {
  const SeqId id(next_id_++);
  SimRequest r;
  r.id = id;
  r.prompt_len = static_cast<int64_t>(prompt.size());
  r.tokens = std::move(prompt);
  r.max_new = max_new;
  r.priority = priority;
  r.arrival = next_arrival_++;
  r.num_forks = num_forks;
  requests_.emplace(id, std::move(r));
  waiting_.push_back(id);
  return id;
}

void SimEngine::set_scoring(SeqId id, int64_t max_reused_tokens, bool logits_every_token) {
  SimRequest& r = requests_.at(id);
  r.max_reused_tokens = max_reused_tokens;
  r.logits_every_token = logits_every_token;
}

void SimEngine::cancel(SeqId id) {
  SimRequest& r = requests_.at(id);
  release_sequence(id, r.tokens, CacheOnRelease::kDrop, *kv_, prefix_.get());
  std::erase(running_, id);
  std::erase(waiting_, id);
  r.running = false;
  r.done = true;
  orphan_fork_children(id);
  check();
}

void SimEngine::orphan_fork_children(SeqId parent) {
  for (auto& [cid, c] : requests_) {
    if (c.fork_parent != parent) continue;  // never forked: resumes as an ordinary sequence
    c.fork_parent = SeqId();
    c.running = false;
    std::erase(running_, cid);
    waiting_.push_back(cid);
  }
}

bool SimEngine::idle() const { return running_.empty() && waiting_.empty(); }

void SimEngine::check() const {
  if (prefix_) {
    prefix_->check_integrity();
  } else {
    kv_->check_integrity(std::vector<int32_t>(kv_->total_blocks().full, 0),
                         std::vector<int32_t>(kv_->total_blocks().sliding, 0));
  }
}

void SimEngine::finish(SeqId id) {
  SimRequest& r = requests_.at(id);
  release_sequence(id, r.tokens, CacheOnRelease::kInsert, *kv_, prefix_.get());
  std::erase(running_, id);
  r.running = false;
  r.done = true;
  orphan_fork_children(id);
}

void SimEngine::apply_plan(const StepPlan& plan) {
  for (SeqId id : plan.rejected) {
    requests_.at(id).rejected = requests_.at(id).done = true;
    std::erase(waiting_, id);
  }
  commit_plan(plan, *kv_, prefix_.get());
  for (const Preemption& p : plan.preempted) {
    SimRequest& r = requests_.at(p.seq);
    r.running = false;
    ++r.num_preemptions;
    std::erase(running_, p.seq);
    waiting_.push_back(p.seq);
    if (r.fork_parent.valid()) {  // never forked: it resumes as an ordinary sequence
      r.fork_parent = SeqId();
    }
  }
  for (const Admission& a : plan.admitted) {
    SimRequest& r = requests_.at(a.seq);
    if (r.cached_tokens < 0) r.cached_tokens = a.match.num_tokens;
    r.last_cached_tokens = a.match.num_tokens;
    r.running = true;
    std::erase(waiting_, a.seq);
    running_.push_back(a.seq);
  }
  for (const ForkOp& f : plan.forks) requests_.at(f.child).fork_parent = SeqId();
}

void SimEngine::after_forward(const StepPlan& plan) {
  for (const SeqWork& w : plan.work) {
    // Speculative decodes accept a pseudo-random number of their draft tokens.
    const int64_t drafts = w.kind == WorkKind::kDecode ? w.num_tokens - 1 : 0;
    const int64_t accepted =
        drafts > 0 ? generated_token(w.seq, w.num_computed) % (drafts + 1) : 0;
    complete_work(w, w.num_tokens - drafts + accepted, *kv_, prefix_.get());
    max_sliding_held_ = std::max(max_sliding_held_, kv_->held_blocks(w.seq).sliding);
    if (!w.samples) continue;
    SimRequest& r = requests_.at(w.seq);
    for (int64_t i = 0; i <= accepted; ++i)
      r.tokens.push_back(generated_token(r.id, static_cast<int64_t>(r.tokens.size())));
    if (r.num_forks > 0 && r.generated() == 1) {  // prompt done: fork the other samples
      for (int32_t f = 0; f < r.num_forks; ++f) {
        const SeqId child(next_id_++);
        SimRequest c;
        c.id = child;
        c.prompt_len = r.prompt_len;
        c.tokens.assign(r.tokens.begin(), r.tokens.begin() + r.prompt_len);
        c.tokens.push_back(generated_token(child, r.prompt_len));
        c.max_new = r.max_new;
        c.priority = r.priority;
        c.arrival = r.arrival;
        c.fork_parent = r.id;
        c.running = true;
        requests_.emplace(child, std::move(c));
        running_.push_back(child);
      }
      r.num_forks = 0;
    }
  }
  for (const SeqWork& w : plan.work) {
    const SimRequest& r = requests_.at(w.seq);
    if (r.running && r.generated() >= r.max_new) finish(w.seq);
  }
}

StepPlan SimEngine::step() {
  // The waiting queue in admission order: priority, then arrival (preempted ones keep theirs).
  std::stable_sort(waiting_.begin(), waiting_.end(), [&](SeqId a, SeqId b) {
    const SimRequest &x = requests_.at(a), &y = requests_.at(b);
    return x.priority != y.priority ? x.priority > y.priority : x.arrival < y.arrival;
  });
  std::vector<SeqState> running, waiting;
  drafted_.assign(running_.size(), {});
  for (size_t i = 0; i < running_.size(); ++i) {
    const SeqId id = running_[i];
    const SimRequest& r = requests_.at(id);
    SeqState v{id,
               r.priority,
               r.arrival,
               r.tokens,
               r.fork_parent,
               r.max_reused_tokens,
               r.logits_every_token};
    const auto len = static_cast<int64_t>(r.tokens.size());
    const int64_t drafts = std::min(draft_tokens_, r.max_new - r.generated() - 1);
    if (drafts > 0 && !r.fork_parent.valid() && kv_->num_computed(id) == len - 1) {
      std::vector<int32_t>& t = drafted_[i];
      t = r.tokens;
      for (int64_t p = len; p < len + drafts; ++p) t.push_back(generated_token(id, p));
      v.tokens = t;
      v.num_draft_tokens = drafts;
    }
    running.push_back(v);
  }
  for (SeqId id : waiting_) {
    const SimRequest& r = requests_.at(id);
    waiting.push_back(SeqState{id, r.priority, r.arrival, r.tokens, SeqId(), r.max_reused_tokens,
                               r.logits_every_token});
  }
  SchedulerInput in{running, waiting, kv_.get(), prefix_.get()};
  StepPlan plan = scheduler_.plan(in);
  apply_plan(plan);
  check();
  for (const SeqWork& w : plan.work) {  // the forward's view: tables cover the new tokens
    EXPECT_GE(static_cast<int64_t>(kv_->full_table(w.seq).size()) * kv_->block_size(),
              w.num_computed + w.num_tokens);
  }
  after_forward(plan);
  check();
  return plan;
}

int64_t SimEngine::run_until_idle(int64_t max_steps) {
  int64_t steps = 0;
  while (!idle() && steps < max_steps) {
    step();
    ++steps;
  }
  return steps;
}

}  // namespace beam::testing
