// Applying a StepPlan to the KV cache and prefix cache, and the bookkeeping around the forward:
// commit_plan (before), complete_work / complete_step (after), release_sequence (finish, cancel).
// None of these can fail on a plan made from the same state; broken invariants abort.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/prefix_cache/prefix_cache.h"
#include "runtime/scheduler/scheduler.h"

namespace beam {

struct CommitResult {
  // Partial last blocks of forked sequences; the engine copies them (KvStorage::copy_blocks on
  // the host) before running the forward.
  std::vector<BlockCopy> copies;
};

// Applies `plan` right after Scheduler::plan on the same state: admitted sequences get KV
// sequences on their locked cached prefix; preempted ones are cached (prefix != nullptr) and
// released; the prefix cache evicts what the new blocks need; fork children are created; every
// work item's slots are reserved. Afterwards every SeqWork's block tables cover its tokens.
CommitResult commit_plan(const StepPlan& plan, KvCacheManager& kv, PrefixCache* prefix);

// After the forward wrote `num_written` slots of work.seq (<= work.num_tokens; fewer when
// speculative tokens were rejected), before the engine appends sampled tokens: advances the
// sequence, caches its new whole blocks in the prefix cache (locked for it; the sliding blocks
// it releases stay there as loose windows), and releases the sliding blocks and prefix locks
// that no later query can see.
void complete_work(const SeqWork& work, int64_t num_written, KvCacheManager& kv,
                   PrefixCache* prefix);
// complete_work for every item of `plan` with its planned token count.
void complete_step(const StepPlan& plan, KvCacheManager& kv, PrefixCache* prefix);

enum class CacheOnRelease { kInsert, kDrop };

// Releases everything `seq` holds — its blocks and prefix locks — for finish, cancel or
// preemption. With kInsert (and a prefix cache) its computed blocks are cached first; `tokens`
// are all of its known tokens. No-op for a sequence without KV (waiting, pending fork).
void release_sequence(SeqId seq, std::span<const int32_t> tokens, CacheOnRelease cache,
                      KvCacheManager& kv, PrefixCache* prefix);

}  // namespace beam
