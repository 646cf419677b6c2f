// SimEngine: a model-free engine loop over the runtime's KV cache, prefix cache and scheduler
// (plan → commit → "forward" → complete → append → finish), used by the runtime_kv tests.
// Generated tokens are a deterministic function of (sequence, position).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/prefix_cache/prefix_cache.h"
#include "runtime/prefix_cache/host_kv_tier.h"
#include "runtime/scheduler/host_restore.h"
#include "runtime/scheduler/scheduler.h"
#include "runtime/scheduler/step_commit.h"

namespace beam::testing {

struct SimRequest {
  SeqId id;
  std::vector<int32_t> tokens;  // prompt + generated
  int64_t prompt_len = 0;
  int64_t max_new = 0;
  int32_t priority = 0;
  int64_t arrival = 0;
  int32_t num_forks = 0;        // extra samples forked from this one after its prompt
  SeqId fork_parent;            // pending fork child until committed
  int64_t cached_tokens = -1;   // prefix hit at the first admission
  int64_t last_cached_tokens = -1;  // prefix hit at the latest admission (resume)
  int64_t num_preemptions = 0;
  bool running = false;
  bool done = false;
  bool rejected = false;
  // As SeqState's: prefix reuse limit and logits for every prefill token (prompt logprobs).
  int64_t max_reused_tokens = std::numeric_limits<int64_t>::max();
  bool logits_every_token = false;
  // As SeqState's: its blocks are cached up to this many tokens (deterministic GPU inference).
  int64_t max_cached_tokens = std::numeric_limits<int64_t>::max();
  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
};

// Shadow KV: each pool slot holds the hash of the token prefix whose key it stores (what a
// model's K and V depend on), and the host tier's slots copies of whole blocks of them.
class SimKv final : public HostBlockMover {
 public:
  SimKv(const KvCacheConfig& kv, BlockCounts host_slots);
  uint64_t& at(AttentionKind pool, int32_t block, int64_t offset);
  void copy(const BlockCopy& c);
  void save(AttentionKind pool, BlockId block, int32_t slot) override;
  void load(AttentionKind pool, int32_t slot, BlockId block) override;

 private:
  int64_t block_size_;
  std::vector<uint64_t> device_[2];  // [blocks * B] per pool
  std::vector<uint64_t> host_[2];    // [slots * B] per pool
};

class SimEngine {
 public:
  // host_slots: the hierarchical cache's host tier (needs prefix_cache; zero: none), written as
  // write_policy says.
  SimEngine(const KvCacheConfig& kv_config, const SchedulerConfig& sched_config, bool prefix_cache,
            int64_t checkpoint_interval_tokens = 0, BlockCounts host_slots = {},
            HostWritePolicy write_policy = HostWritePolicy::kWriteBack);

  // Queues a request; num_forks > 0 adds that many samples forked after the prompt.
  SeqId submit(std::vector<int32_t> prompt, int64_t max_new, int32_t priority = 0,
               int32_t num_forks = 0);
  // Sets a queued request's SeqState scoring fields (SimRequest).
  void set_scoring(SeqId id, int64_t max_reused_tokens, bool logits_every_token);
  // Sets a queued request's SeqState::max_cached_tokens (SimRequest).
  void set_cache_limit(SeqId id, int64_t max_cached_tokens);
  // Releases everything the request holds, wherever it is.
  void cancel(SeqId id);
  // One step; returns its plan. Checks every invariant after each phase.
  StepPlan step();
  // Steps until nothing is waiting or running (or max_steps); returns the steps taken.
  int64_t run_until_idle(int64_t max_steps);
  bool idle() const;

  // Decoding sequences propose up to k drafts a step (the tokens they will generate; a
  // pseudo-random number of them is accepted). 0: no speculation.
  void set_draft_tokens(int64_t k) { draft_tokens_ = k; }

  static int32_t generated_token(SeqId id, int64_t position);
  void check() const;

  KvCacheManager& kv() { return *kv_; }
  PrefixCache* prefix() { return prefix_.get(); }
  const HostKvTier* host_tier() const { return host_.get(); }
  const Scheduler& scheduler() const { return scheduler_; }
  const SimRequest& request(SeqId id) const { return requests_.at(id); }
  const std::vector<SeqId>& running() const { return running_; }
  const std::vector<SeqId>& waiting() const { return waiting_; }
  // Largest number of sliding blocks any one sequence held after a step.
  int64_t max_sliding_held_per_seq() const { return max_sliding_held_; }

 private:
  // Checks the KV each work item's queries read, then writes its new tokens' slots.
  void forward(const StepPlan& plan);
  void apply_plan(const StepPlan& plan);
  void after_forward(const StepPlan& plan);
  void finish(SeqId id);
  void orphan_fork_children(SeqId parent);

  int64_t draft_tokens_ = 0;
  std::vector<std::vector<int32_t>> drafted_;  // this step's running views with their drafts
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<SimKv> shadow_;
  std::unique_ptr<HostKvTier> host_;
  HostRestoreMemo host_memo_;
  std::unique_ptr<PrefixCache> prefix_;
  Scheduler scheduler_;
  std::map<SeqId, SimRequest> requests_;
  std::vector<SeqId> running_;
  std::vector<SeqId> waiting_;
  int64_t next_id_ = 1;
  int64_t next_arrival_ = 0;
  int64_t max_sliding_held_ = 0;
};

}  // namespace beam::testing
