// SimEngine: a model-free engine loop for the runtime_kv tests.
#include "sim_engine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/check.h"
#include "runtime/scheduler/host_restore.h"

namespace beam::testing {

namespace {

int pool_index(AttentionKind pool) { return pool == AttentionKind::kFull ? 0 : 1; }

}  // namespace

SimKv::SimKv(const KvCacheConfig& kv, BlockCounts host_slots) : block_size_(kv.block_size_tokens) {
  device_[0].assign(static_cast<size_t>(kv.num_full_blocks * block_size_), 0);
  device_[1].assign(static_cast<size_t>(kv.num_sliding_blocks * block_size_), 0);
  host_[0].assign(static_cast<size_t>(host_slots.full * block_size_), 0);
  host_[1].assign(static_cast<size_t>(host_slots.sliding * block_size_), 0);
}

uint64_t& SimKv::at(AttentionKind pool, int32_t block, int64_t offset) {
  return device_[pool_index(pool)].at(static_cast<size_t>(block * block_size_ + offset));
}

void SimKv::copy(const BlockCopy& c) {
  auto& d = device_[pool_index(c.pool)];
  std::copy_n(d.begin() + c.src.value * block_size_, block_size_, d.begin() + c.dst.value * block_size_);
}

void SimKv::save(AttentionKind pool, BlockId block, int32_t slot) {
  const int p = pool_index(pool);
  ASSERT_LE(static_cast<size_t>((slot + 1) * block_size_), host_[p].size());
  std::copy_n(device_[p].begin() + block.value * block_size_, block_size_, host_[p].begin() + slot * block_size_);
}

void SimKv::load(AttentionKind pool, int32_t slot, BlockId block) {
  const int p = pool_index(pool);
  std::copy_n(host_[p].begin() + slot * block_size_, block_size_, device_[p].begin() + block.value * block_size_);
}

SimEngine::SimEngine(const KvCacheConfig& kv_config, const SchedulerConfig& sched_config,
                     bool prefix_cache, int64_t checkpoint_interval_tokens, BlockCounts host_slots,
                     HostWritePolicy write_policy)
    : scheduler_(sched_config) {
  Expected<KvCacheManager> kv = KvCacheManager::create(kv_config);
  BEAM_CHECK(kv.ok()) << kv.error().message;
  kv_ = std::make_unique<KvCacheManager>(std::move(kv).value());
  shadow_ = std::make_unique<SimKv>(kv_config, host_slots);
  if (prefix_cache)
    prefix_ = std::make_unique<PrefixCache>(*kv_, PrefixCacheConfig{checkpoint_interval_tokens});
  if (prefix_cache && (host_slots.full > 0 || host_slots.sliding > 0)) {
    host_ = std::make_unique<HostKvTier>(kv_config.block_size_tokens, host_slots, *shadow_);
    prefix_->attach_host_tier(host_.get(), write_policy);
  }
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

void SimEngine::set_cache_limit(SeqId id, int64_t max_cached_tokens) {
  requests_.at(id).max_cached_tokens = max_cached_tokens;
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
  for (const BlockCopy& c : commit_plan(plan, *kv_, prefix_.get()).copies) shadow_->copy(c);
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

void SimEngine::forward(const StepPlan& plan) {
  const int64_t B = kv_->block_size(), W = kv_->sliding_window();
  for (const SeqWork& w : plan.work) {
    // key_hash[p]: the prefix tokens[0..p] the key at p depends on.
    std::vector<uint64_t> key_hash(static_cast<size_t>(w.num_computed + w.num_tokens));
    uint64_t h = 0x243f6a8885a308d3ull;
    for (size_t p = 0; p < key_hash.size(); ++p) {
      h = (h ^ static_cast<uint32_t>(w.tokens[p])) * 0x100000001b3ull + p;
      key_hash[p] = h;
    }
    const std::span<const int32_t> full = kv_->full_table(w.seq), sliding = kv_->sliding_table(w.seq);
    const int64_t first_sliding = std::max<int64_t>(0, w.num_computed - W + 1);
    for (int64_t p = 0; p < w.num_computed; ++p) {
      ASSERT_EQ(shadow_->at(AttentionKind::kFull, full[p / B], p % B), key_hash[p])
          << "sequence " << w.seq.value << " reads a wrong full-attention key at " << p;
      if (p < first_sliding) continue;
      ASSERT_GE(sliding[p / B], 0) << "sequence " << w.seq.value << " lost its window at " << p;
      ASSERT_EQ(shadow_->at(AttentionKind::kSliding, sliding[p / B], p % B), key_hash[p])
          << "sequence " << w.seq.value << " reads a wrong sliding-window key at " << p;
    }
    for (int64_t p = w.num_computed; p < w.num_computed + w.num_tokens; ++p) {
      shadow_->at(AttentionKind::kFull, full[p / B], p % B) = key_hash[p];
      shadow_->at(AttentionKind::kSliding, sliding[p / B], p % B) = key_hash[p];
    }
  }
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
    v.max_cached_tokens = r.max_cached_tokens;
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
    waiting.back().max_cached_tokens = r.max_cached_tokens;
  }
  if (host_) {  // as the engine: as many as could start now
    const int64_t room = scheduler_.config().max_running_seqs - static_cast<int64_t>(running.size());
    restore_waiting_from_host(waiting, room, *kv_, *prefix_, &host_memo_);
  }
  SchedulerInput in{running, waiting, kv_.get(), prefix_.get()};
  StepPlan plan = scheduler_.plan(in);
  apply_plan(plan);
  check();
  for (const SeqWork& w : plan.work) {  // the forward's view: tables cover the new tokens
    EXPECT_GE(static_cast<int64_t>(kv_->full_table(w.seq).size()) * kv_->block_size(),
              w.num_computed + w.num_tokens);
  }
  forward(plan);
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
