// Scheduler: plans one engine step — which running sequences decode, which prefill how many
// tokens (chunked, under a per-step token budget), which waiting sequences are admitted (by the
// KV capacity of both pools after prefix-cache hits) and which running ones are preempted when a
// pool would run out. plan() is pure; step_commit.h applies a plan.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/kv_cache/kv_types.h"
#include "runtime/prefix_cache/prefix_cache.h"

namespace beam {

struct SchedulerConfig {
  int64_t max_step_tokens = 2048;           // tokens per forward, decode and prefill together
  int64_t max_running_seqs = 64;            // sequences holding KV at once
  int64_t max_prefill_chunk_tokens = 2048;  // tokens one sequence prefills per step
  // Admission leaves this many blocks per running sequence free in each pool (decode growth).
  int64_t admission_headroom_blocks_per_seq = 1;
  // Waiting sequences (after the admitted ones) whose cached prefixes eviction should spare;
  // each costs a prefix-cache match (hashing its prompt) per step.
  int64_t prefix_lookahead_seqs = 8;
  // Prefill tokens of SeqState::logits_every_token sequences a step (each a [vocab] f32 logits
  // row).
  int64_t max_logit_tokens_per_step = 512;
};

// What the scheduler reads about one sequence. The engine owns the storage behind `tokens`.
struct SeqState {
  SeqId id;
  int32_t priority = 0;  // higher is served first and preempted last
  int64_t arrival = 0;   // submission order: among equal priority, earlier first
  // Every known token: the prompt, then generated ones. KV exists for the first
  // kv.num_computed(id) of them (0 while waiting); the rest are computed by prefill/decode.
  std::span<const int32_t> tokens;
  // Running only: a sample of a request with n > 1 that is not yet in the KV cache; it is
  // forked from this sequence (its prompt owner) at commit and then decodes its own tokens.
  SeqId fork_parent;
  // Prefix-cache matches reuse at most this many tokens (0: the prompt is computed whole).
  int64_t max_reused_tokens = std::numeric_limits<int64_t>::max();
  // Its prefill chunks compute logits for every token (prompt logprobs): together at most
  // SchedulerConfig::max_logit_tokens_per_step tokens a step.
  bool logits_every_token = false;
  // The prefix-cache salt its blocks are matched and cached under (0: none; PrefixCache).
  uint64_t cache_salt = 0;
  // Its blocks are cached for other sequences up to this many tokens (PrefixCache::
  // set_token_limit; deterministic GPU inference: its prompt).
  int64_t max_cached_tokens = std::numeric_limits<int64_t>::max();
  // Running decodes only: the last this many of `tokens` are speculative drafts (no KV, not yet
  // accepted); its decode feeds the last accepted token and as many drafts as the step's token
  // budget and the pools allow (none rather than preempting anything).
  int64_t num_draft_tokens = 0;
};

// The tokens whose cached prefix `s` may reuse (match() keeps the last one for recompute): empty,
// all of s.tokens, or the first s.max_reused_tokens + 1.
std::span<const int32_t> reusable_tokens(const SeqState& s);
// The longest cached prefix `s` may reuse (PrefixCache::match within s.max_reused_tokens).
PrefixMatch match_reusable(const PrefixCache& prefix, const SeqState& s);

struct SchedulerInput {
  // Sequences holding KV (and pending fork children). A running sequence with nothing left to
  // compute (a finished parent kept for its pending fork children) gets no work.
  std::span<const SeqState> running;
  // New and preempted sequences in the order they should be admitted (the engine's policy:
  // priority, then arrival, possibly longest cached prefix first).
  std::span<const SeqState> waiting;
  const KvCacheManager* kv = nullptr;
  const PrefixCache* prefix = nullptr;  // nullptr: prefix caching off
};

enum class WorkKind { kDecode, kPrefill };

// One sequence's share of the forward: tokens[num_computed, num_computed + num_tokens).
// A decode feeds the last accepted token, then num_tokens - 1 of its drafts (SeqState).
struct SeqWork {
  SeqId seq;
  std::span<const int32_t> tokens;  // the sequence's known tokens (SeqState::tokens)
  WorkKind kind = WorkKind::kPrefill;
  int64_t num_computed = 0;
  int64_t num_tokens = 0;
  bool samples = false;  // the last fed token reaches the end of the known tokens: sample after it
};

struct Admission {
  SeqId seq;
  PrefixMatch match;  // match.num_tokens prompt tokens come from the prefix cache (usage: cached)
  uint64_t cache_salt = 0;  // SeqState::cache_salt
  int64_t max_cached_tokens = std::numeric_limits<int64_t>::max();  // SeqState's
};

struct Preemption {
  SeqId seq;
  std::span<const int32_t> tokens;  // to cache its computed blocks for the resume
};

struct ForkOp {
  SeqId parent;
  SeqId child;
  std::span<const int32_t> parent_tokens;  // the parent's known tokens
};

struct StepPlan {
  // Back to the waiting queue (engine), KV released/cached by commit. A pending fork child in
  // this list was never forked: it waits as an ordinary sequence (clear its fork_parent).
  std::vector<Preemption> preempted;
  std::vector<Admission> admitted;    // waiting → running; their first chunk is in `work`
  std::vector<ForkOp> forks;          // pending fork children created this step
  std::vector<SeqWork> work;          // batch order: decodes first, then prefill chunks
  std::vector<SeqId> rejected;        // waiting sequences that can never fit the pools
  // Cached prefixes of the next waiting sequences: eviction spares them while it can.
  std::vector<PrefixNodeId> protect;
  BlockCounts new_blocks;             // blocks commit allocates (forks + reservations)

  int64_t num_tokens() const;
  bool empty() const { return work.empty() && preempted.empty() && rejected.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);
  const SchedulerConfig& config() const { return config_; }

  // Plans one step. Pure: reads the input, the KV cache and the prefix cache, changes nothing.
  // Decodes come first (running sequences in priority/arrival order), then running prefills,
  // then admissions in the waiting queue's order until the budget, the sequence limit or the KV
  // capacity stops them (head of line blocks: a later waiting sequence never jumps an earlier
  // one that does not fit). When a running sequence needs blocks that are not there, the
  // lowest-priority, newest running sequences are preempted (possibly itself).
  StepPlan plan(const SchedulerInput& input) const;

 private:
  SchedulerConfig config_;
};

}  // namespace beam
