// PrefixCache: lock counts (acquire / release / fork), window pins of endpoints, block holding.
#include "runtime/prefix_cache/prefix_cache.h"

#include <algorithm>

#include "core/check.h"

namespace beam {

void PrefixCache::set_sliding(PrefixNodeId id, int32_t block) {
  Node& n = node(id);
  BEAM_CHECK(n.sliding < 0 && n.sliding_lock == 0 && block >= 0)
      << "set_sliding on node " << id.value << " holding " << n.sliding << " with block " << block;
  kv_.add_block_ref(AttentionKind::kSliding, BlockId(block));
  n.sliding = block;
  ++num_sliding_held_;
  ++num_evictable_sliding_;
}

void PrefixCache::drop_sliding(PrefixNodeId id) {
  Node& n = node(id);
  BEAM_CHECK(n.sliding >= 0 && n.sliding_lock == 0) << "drop_sliding on node " << id.value;
  kv_.release_block(AttentionKind::kSliding, BlockId(n.sliding));
  n.sliding = -1;
  --num_sliding_held_;
  --num_evictable_sliding_;
  ++epoch_;
}

void PrefixCache::add_full_lock(PrefixNodeId id, int delta) {
  Node& n = node(id);
  const bool was_unlocked = n.full_lock == 0;
  n.full_lock += delta;
  BEAM_CHECK(n.full_lock >= 0) << "full lock underflow on node " << id.value;
  num_evictable_full_ += static_cast<int64_t>(n.full_lock == 0) - static_cast<int64_t>(was_unlocked);
}

void PrefixCache::add_sliding_lock(PrefixNodeId id, int delta) {
  Node& n = node(id);
  BEAM_CHECK(n.sliding >= 0) << "sliding lock on tombstone " << id.value;
  const bool was_unlocked = n.sliding_lock == 0;
  n.sliding_lock += delta;
  BEAM_CHECK(n.sliding_lock >= 0) << "sliding lock underflow on node " << id.value;
  num_evictable_sliding_ +=
      static_cast<int64_t>(n.sliding_lock == 0) - static_cast<int64_t>(was_unlocked);
  // A window no endpoint pins any more is useless once its last user lets go.
  if (n.sliding_lock == 0 && n.window_pins == 0) drop_sliding(id);
}

void PrefixCache::mark_endpoint(PrefixNodeId id) {
  Node& e = node(id);
  BEAM_CHECK(!e.endpoint && id != kRoot) << "mark_endpoint on node " << id.value;
  PrefixNodeId w = id;
  for (int64_t i = e.depth - 1; i >= window_first(e.depth); --i) {
    BEAM_CHECK(node(w).sliding >= 0) << "endpoint " << id.value << " window block " << i << " missing";
    ++node(w).window_pins;
    w = node(w).parent;
  }
  e.endpoint = true;
  ++num_endpoints_;
  reindex(id);
}

void PrefixCache::unmark_endpoint(PrefixNodeId id) {
  Node& e = node(id);
  BEAM_CHECK(e.endpoint) << "unmark_endpoint on node " << id.value;
  e.endpoint = false;
  --num_endpoints_;
  PrefixNodeId w = id;
  for (int64_t i = e.depth - 1; i >= window_first(e.depth); --i) {
    Node& n = node(w);
    --n.window_pins;
    if (n.window_pins == 0 && n.sliding_lock == 0) drop_sliding(w);
    w = n.parent;
  }
  reindex(id);
}

void PrefixCache::touch(PrefixNodeId id) {
  node(id).tick = ++clock_;
  reindex(id);
}

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
  const int64_t K =
      std::min<int64_t>(kv_.num_computed(parent), static_cast<int64_t>(parent_tokens.size())) /
      block_size_;
  if (K > 0) insert_checkpoint(parent, parent_tokens, K);
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
  prune(rec.endpoint);
}


void PrefixCache::insert_checkpoint(SeqId seq, std::span<const int32_t> tokens, int64_t K) {
  const std::span<const int32_t> sliding = kv_.sliding_table(seq);
  const int64_t lo = window_first(K);
  for (int64_t i = lo; i < K; ++i)
    if (sliding[i] < 0) return;  // window already gone (not expected right after a step)
  if (build_path(seq, tokens, K, /*create=*/false) < K) return;  // hash collision on the way
  build_path(seq, tokens, K, /*create=*/true);
  // Where the tree holds another copy of a block the sequence computed itself and nobody uses
  // it, keep the sequence's: the copy would otherwise stay locked next to it for its lifetime.
  const std::span<const int32_t> full = kv_.full_table(seq);
  for (int64_t i = 0; i < K; ++i) {
    Node& n = node(path_[i]);
    if (n.full == full[i] || n.full_lock > 0) continue;
    kv_.add_block_ref(AttentionKind::kFull, BlockId(full[i]));
    kv_.release_block(AttentionKind::kFull, BlockId(n.full));
    n.full = full[i];
  }
  for (int64_t i = lo; i < K; ++i)
    if (node(path_[i]).sliding < 0) set_sliding(path_[i], sliding[i]);
  const PrefixNodeId e = path_[K - 1];
  if (!node(e).endpoint) mark_endpoint(e);
  inherit_gap(seq, e);
  touch(e);
  // Move seq's lock down to the checkpoint: full locks on the whole path, sliding locks on the
  // part of the window the sequence still shares (from its first kept block on).
  const int64_t first_kept = kv_.first_kept_sliding_block(seq);
  release_sliding_below(seq, first_kept);
  const int64_t sliding_lo = std::min(first_kept, K);
  auto it = locks_.find(seq);
  if (it == locks_.end()) {
    const LockRecord rec{e, K, sliding_lo, -1};
    lock_path(rec);
    locks_.emplace(seq, rec);
    return;
  }
  LockRecord& rec = it->second;
  BEAM_CHECK(rec.depth <= K && path_[rec.depth - 1] == rec.endpoint)
      << "checkpoint of sequence " << seq.value << " is not below its locked prefix";
  for (int64_t i = rec.depth; i < K; ++i) add_full_lock(path_[i], +1);
  for (int64_t i = std::max(sliding_lo, rec.depth); i < K; ++i) add_sliding_lock(path_[i], +1);
  const PrefixNodeId old_endpoint = rec.endpoint;
  rec = LockRecord{e, K, sliding_lo, rec.session_gap};
  reindex(old_endpoint);
  reindex(e);
}

}  // namespace beam
