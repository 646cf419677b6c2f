// PrefixCache: lock records of sequences (acquire / release / fork) and what they mean for the
// evictable counts (plans use those to size admissions and preemptions).
#include "runtime/prefix_cache/prefix_cache.h"

#include <algorithm>

#include "core/check.h"

namespace beam {

void PrefixCache::lock_path(const LockRecord& rec) {
  PrefixNodeId id = rec.endpoint;
  for (int64_t i = rec.depth - 1; i >= 0; --i) {
    add_full_lock(id, +1);
    if (i >= rec.sliding_lo) add_sliding_lock(id, +1);
    id = node(id).parent;
  }
  BEAM_CHECK(id == kRoot) << "lock path does not end at the root";
  reindex(rec.endpoint);
}

void PrefixCache::acquire(SeqId seq, const PrefixMatch& match) {
  BEAM_CHECK(match.num_tokens > 0 && match.endpoint.valid()) << "acquire of an empty match";
  BEAM_CHECK(match.epoch == epoch_) << "stale prefix match for sequence " << seq.value
                                    << ": the tree lost blocks since match()";
  BEAM_CHECK(!locks_.count(seq)) << "sequence " << seq.value << " already holds a prefix lock";
  const int64_t k = match.num_tokens / block_size_;
  const LockRecord rec{match.endpoint, k, window_first(k), -1};
  BEAM_CHECK_EQ(node(rec.endpoint).depth, k) << "match endpoint depth";
  full_scratch_.assign(static_cast<size_t>(k), -1);
  sliding_scratch_.assign(static_cast<size_t>(k), -1);
  PrefixNodeId id = rec.endpoint;
  for (int64_t i = k - 1; i >= 0; --i) {
    full_scratch_[i] = node(id).full;
    if (i >= rec.sliding_lo) sliding_scratch_[i] = node(id).sliding;
    id = node(id).parent;
  }
  lock_path(rec);
  if (!node(rec.endpoint).endpoint) mark_endpoint(rec.endpoint);
  Node& e = node(rec.endpoint);
  if (e.tick > 0) {  // this session's pace, and everyone's
    e.reuse_gap = static_cast<int64_t>(clock_ + 1 - e.tick);
    mean_reuse_gap_ = mean_reuse_gap_ < 0 ? e.reuse_gap : (7 * mean_reuse_gap_ + e.reuse_gap) / 8;
  }
  touch(rec.endpoint);
  locks_.emplace(seq, rec).first->second.session_gap = e.reuse_gap;
  kv_.attach_prefix(seq, full_scratch_, sliding_scratch_, match.num_tokens);
}

void PrefixCache::release_sliding_below(SeqId seq, int64_t first_kept_block) {
  auto it = locks_.find(seq);
  if (it == locks_.end()) return;
  LockRecord& rec = it->second;
  const int64_t upto = std::min(first_kept_block, rec.depth);
  if (upto <= rec.sliding_lo) return;
  PrefixNodeId id = rec.endpoint;
  for (int64_t i = rec.depth - 1; i >= rec.sliding_lo; --i) {
    const PrefixNodeId parent = node(id).parent;
    if (i < upto) add_sliding_lock(id, -1);
    id = parent;
  }
  rec.sliding_lo = upto;
}

void PrefixCache::fork(SeqId parent, SeqId child, std::span<const int32_t> parent_tokens) {
  BEAM_CHECK(!locks_.count(child)) << "sequence " << child.value << " already holds a prefix lock";
  set_scope(child, scope_of(parent));
  const int64_t K =
      std::min<int64_t>(kv_.num_computed(parent), static_cast<int64_t>(parent_tokens.size())) /
      block_size_;
  // Usually a no-op: the parent's computed blocks were cached as it ran.
  if (K > 0) cache_running(parent, parent_tokens, kv_.num_computed(parent));
  auto it = locks_.find(parent);
  if (it == locks_.end()) return;
  const LockRecord rec = it->second;
  lock_path(rec);
  locks_.emplace(child, rec);
}

void PrefixCache::inherit_gap(SeqId seq, PrefixNodeId endpoint) {
  auto it = locks_.find(seq);
  if (it != locks_.end() && it->second.session_gap >= 0) node(endpoint).reuse_gap = it->second.session_gap;
}

BlockCounts PrefixCache::blocks_locked_only_by(SeqId seq) const {
  BlockCounts n;
  auto it = locks_.find(seq);
  if (it == locks_.end()) return n;
  const LockRecord& rec = it->second;
  PrefixNodeId id = rec.endpoint;
  for (int64_t i = rec.depth - 1; i >= 0; --i) {
    const Node& nd = node(id);
    n.full += nd.full_lock == 1;
    n.sliding += i >= rec.sliding_lo && nd.sliding_lock == 1;
    id = nd.parent;
  }
  return n;
}

BlockCounts PrefixCache::newly_locked(const PrefixMatch& match,
                                      std::span<const SeqId> released) const {
  if (released.empty() || match.num_tokens == 0) return match.newly_locked;
  // Locks the released sequences hold on each node (full, sliding).
  std::unordered_map<int32_t, std::pair<int32_t, int32_t>> gone;
  for (SeqId seq : released) {
    auto it = locks_.find(seq);
    if (it == locks_.end()) continue;
    const LockRecord& rec = it->second;
    PrefixNodeId id = rec.endpoint;
    for (int64_t i = rec.depth - 1; i >= 0; --i) {
      auto& g = gone[id.value];
      ++g.first;
      g.second += i >= rec.sliding_lo;
      id = node(id).parent;
    }
  }
  BlockCounts n;
  const int64_t k = match.num_tokens / block_size_;
  const int64_t window_lo = window_first(k);
  PrefixNodeId id = match.endpoint;
  for (int64_t i = k - 1; i >= 0; --i) {
    const Node& nd = node(id);
    auto it = gone.find(id.value);
    const std::pair<int32_t, int32_t> g = it == gone.end() ? std::make_pair(0, 0) : it->second;
    n.full += nd.full_lock == g.first;
    n.sliding += i >= window_lo && nd.sliding_lock == g.second;
    id = nd.parent;
  }
  return n;
}

void PrefixCache::release(SeqId seq) {
  scopes_.erase(seq);
  auto it = locks_.find(seq);
  if (it == locks_.end()) return;
  const LockRecord rec = it->second;
  release_sliding_below(seq, rec.depth);
  locks_.erase(it);
  PrefixNodeId id = rec.endpoint;
  for (int64_t i = rec.depth - 1; i >= 0; --i) {
    add_full_lock(id, -1);
    id = node(id).parent;
  }
  reindex(rec.endpoint);
  prune(rec.endpoint, /*evicting=*/false);
}


}  // namespace beam
