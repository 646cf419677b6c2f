// commit_plan, complete_work / complete_step and release_sequence.
#include "runtime/scheduler/step_commit.h"

#include "core/check.h"

namespace beam {

CommitResult commit_plan(const StepPlan& plan, KvCacheManager& kv, PrefixCache* prefix) {
  CommitResult result;
  // Lock admitted prefixes first: the matches were made on the tree as it is now, before
  // preemptions release locks (which may drop windows the matches rely on).
  for (const Admission& a : plan.admitted) {
    kv.add_sequence(a.seq);
    if (prefix != nullptr) {
      prefix->set_salt(a.seq, a.cache_salt);
      prefix->set_token_limit(a.seq, a.max_cached_tokens);
    }
    if (a.match.num_tokens > 0) {
      BEAM_CHECK(prefix != nullptr) << "prefix hit without prefix cache";
      prefix->acquire(a.seq, a.match);
    }
  }
  for (const Preemption& p : plan.preempted)
    release_sequence(p.seq, p.tokens, CacheOnRelease::kInsert, kv, prefix);
  if (prefix != nullptr) {
    prefix->evict_until_free(plan.new_blocks, plan.protect);
  } else {
    BEAM_CHECK(plan.new_blocks.fits_in(kv.free_blocks())) << "plan needs more blocks than are free";
  }
  for (const ForkOp& f : plan.forks) {
    kv.fork(f.parent, f.child, &result.copies);
    if (prefix != nullptr) prefix->fork(f.parent, f.child, f.parent_tokens);
  }
  for (const SeqWork& w : plan.work) {
    BEAM_CHECK_EQ(kv.num_computed(w.seq), w.num_computed) << "sequence " << w.seq.value;
    kv.reserve(w.seq, w.num_computed + w.num_tokens);
  }
  return result;
}

void complete_work(const SeqWork& work, int64_t num_written, KvCacheManager& kv,
                   PrefixCache* prefix) {
  BEAM_CHECK(num_written <= work.num_tokens) << "sequence " << work.seq.value << " wrote "
                                             << num_written << " of " << work.num_tokens;
  const int64_t prev_computed = kv.num_computed(work.seq);
  kv.advance(work.seq, num_written);
  if (prefix != nullptr) {
    // Locks first, then caching the new blocks (which adopts the sliding blocks the sequence
    // still holds), then the sequence's own out-of-window blocks.
    prefix->release_sliding_below(work.seq, kv.first_kept_sliding_block(work.seq));
    prefix->cache_running(work.seq, work.tokens, prev_computed);
  }
  kv.release_out_of_window(work.seq);
}

void complete_step(const StepPlan& plan, KvCacheManager& kv, PrefixCache* prefix) {
  for (const SeqWork& w : plan.work) complete_work(w, w.num_tokens, kv, prefix);
}

void release_sequence(SeqId seq, std::span<const int32_t> tokens, CacheOnRelease cache,
                      KvCacheManager& kv, PrefixCache* prefix) {
  if (!kv.has_sequence(seq)) return;
  if (prefix != nullptr) {
    switch (cache) {
      case CacheOnRelease::kInsert: prefix->insert(seq, tokens); break;
      case CacheOnRelease::kDrop: break;
    }
    prefix->release(seq);
  }
  kv.free_sequence(seq);
}

}  // namespace beam
