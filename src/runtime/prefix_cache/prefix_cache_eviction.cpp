// PrefixCache eviction: node removal, pruning of useless leaves, eviction indexes and victims.
//
// Policy (why): a cached prefix is only worth something up to its deepest intact window, so
//  - leaves are always endpoints (or locked): a leaf without an intact window is pruned at once;
//  - full-pool pressure trims a leaf back to its previous endpoint (an earlier turn's end or a
//    checkpoint), choosing the session expected back last: each endpoint remembers the gap
//    between the last two uses of its session (unknown: the average gap of all sessions), and
//    the victim maximises |gap - idle time| (idle time alone before any reuse was seen). Plain LRU evicts exactly the session that returns next when
//    sessions are revisited round-robin, giving zero hits once the pool is smaller than the
//    working set; this estimate keeps a stable subset of sessions instead, and still evicts
//    sessions that stopped coming back (their overdue time keeps growing);
//  - trimming stops at the first ancestor whose window is still intact (loose windows make that
//    one block up, so pressure shortens a prefix block by block where windows remain);
//  - sliding-pool pressure first drops loose windows (released by sequences, pinned by nobody),
//    oldest first, then breaks interior endpoints (fallback points) shallowest first, then the
//    windows of locked leaves (their sequences are past them), then idle leaves as above.
#include <algorithm>

#include "core/check.h"
#include "runtime/prefix_cache/prefix_cache.h"

namespace beam {

PrefixCache::InteriorKey PrefixCache::interior_key_of(PrefixNodeId id) const {
  const Node& n = node(id);
  return {n.depth, n.tick, id.value};
}

void PrefixCache::reindex(PrefixNodeId id) {
  Node& n = node(id);
  if (n.in_interior_index) interior_index_.erase(n.interior_key);
  if (n.in_leaf_set) leaf_endpoints_.erase(id.value);
  n.in_interior_index = n.in_leaf_set = false;
  if (!n.in_use || id == kRoot || !n.endpoint) return;
  if (n.num_children == 0) {
    leaf_endpoints_.insert(id.value);
    n.in_leaf_set = true;
  } else {
    n.interior_key = interior_key_of(id);
    interior_index_.insert(n.interior_key);
    n.in_interior_index = true;
  }
}

uint64_t PrefixCache::eviction_score(const Node& leaf) const {
  const int64_t idle = static_cast<int64_t>(clock_ - leaf.tick);
  const int64_t gap = leaf.reuse_gap >= 0 ? leaf.reuse_gap : mean_reuse_gap_;
  if (gap < 0) return static_cast<uint64_t>(idle);  // nothing was ever reused: LRU
  return static_cast<uint64_t>(gap >= idle ? gap - idle : idle - gap);
}

PrefixNodeId PrefixCache::pick_leaf(bool prefer_locked, std::span<const PrefixNodeId> protect) const {
  PrefixNodeId best;
  bool best_protected = true;
  uint64_t best_score = 0;
  for (int32_t id : leaf_endpoints_) {
    const Node& n = nodes_[id];
    if (n.full_lock > 0) {
      if (prefer_locked) return PrefixNodeId(id);
      continue;
    }
    const bool prot = std::find(protect.begin(), protect.end(), PrefixNodeId(id)) != protect.end();
    const uint64_t score = eviction_score(n);
    if (!best.valid() || (best_protected && !prot) || (prot == best_protected && score > best_score)) {
      best = PrefixNodeId(id);
      best_protected = prot;
      best_score = score;
    }
  }
  return best;
}

void PrefixCache::delete_node(PrefixNodeId id) {
  Node& n = node(id);
  BEAM_CHECK(id != kRoot && n.in_use && n.num_children == 0 && !n.endpoint && n.full_lock == 0 &&
             n.sliding_lock == 0 && n.window_pins == 0)
      << "delete of busy node " << id.value;
  if (n.sliding >= 0) drop_sliding(id);
  if (host_ != nullptr && saving_ && host_keeps(n))
    host_->save(AttentionKind::kFull, host_ref(id), BlockId(n.full));
  host_restores_unused_ += n.restored;
  kv_.release_block(AttentionKind::kFull, BlockId(n.full));
  children_.erase(ChildKey{n.parent.value, n.hash});
  --node(n.parent).num_children;
  n.in_use = false;
  reindex(id);
  free_nodes_.push_back(id.value);
  --num_nodes_;
  --num_evictable_full_;
  ++epoch_;
}

PrefixNodeId PrefixCache::prune(PrefixNodeId id, bool evicting) {
  while (id != kRoot) {
    const Node& n = node(id);
    if (n.num_children > 0 || n.endpoint || n.full_lock > 0) break;
    if (window_intact(id)) {  // still resumable here: the new end of this prefix
      mark_endpoint(id, /*resumable=*/!evicting);
      break;
    }
    const PrefixNodeId parent = n.parent;
    delete_node(id);
    reindex(parent);
    id = parent;
  }
  return id;
}

PrefixNodeId PrefixCache::evict_leaf(PrefixNodeId id) {
  const uint64_t tick = node(id).tick;
  const int64_t gap = node(id).reuse_gap;
  unmark_endpoint(id);
  const PrefixNodeId parent = node(id).parent;
  delete_node(id);
  reindex(parent);
  const PrefixNodeId survivor = prune(parent, /*evicting=*/true);
  Node& s = node(survivor);
  if (survivor != kRoot && s.endpoint && s.num_children == 0 && s.tick < tick) {
    s.tick = tick;  // the same session, shorter: it keeps its recency and pace
    s.reuse_gap = gap;
    reindex(survivor);
  }
  return survivor;
}

void PrefixCache::break_endpoint(PrefixNodeId id) {
  const Node& n = node(id);
  if (n.num_children == 0 && n.full_lock == 0) {
    evict_leaf(id);
    return;
  }
  unmark_endpoint(id);  // locked or interior: the node stays, its unpinned window goes
}

void PrefixCache::evict_until_free(BlockCounts target_free, std::span<const PrefixNodeId> protect) {
  BEAM_CHECK(target_free.fits_in(kv_.free_blocks() + evictable()))
      << "prefix cache cannot free " << target_free.full << " full / " << target_free.sliding
      << " sliding blocks (free " << kv_.free_blocks().full << "/" << kv_.free_blocks().sliding
      << ", evictable " << num_evictable_full_ << "/" << num_evictable_sliding_ << ")";
  // A protected prefix that has to shrink stays protected at its new end. The shortened leaf
  // keeps its session's score, so it stays the victim without a new scan.
  protect_scratch_.assign(protect.begin(), protect.end());
  PrefixNodeId victim;
  while (kv_.free_blocks().full < target_free.full) {
    if (!victim.valid()) victim = pick_leaf(/*prefer_locked=*/false, protect_scratch_);
    BEAM_CHECK(victim.valid()) << "no evictable leaf";
    const bool was_protected =
        std::find(protect_scratch_.begin(), protect_scratch_.end(), victim) != protect_scratch_.end();
    const uint64_t score = eviction_score(node(victim));
    const PrefixNodeId survivor = evict_leaf(victim);
    for (PrefixNodeId& p : protect_scratch_)
      if (p == victim) p = survivor;
    const Node& s = node(survivor);
    const bool same = survivor != kRoot && s.endpoint && s.num_children == 0 && s.full_lock == 0 &&
                      eviction_score(s) == score;
    victim = same && !was_protected ? survivor : PrefixNodeId();
  }
  while (kv_.free_blocks().sliding < target_free.sliding) {
    if (!loose_index_.empty()) {
      drop_sliding(PrefixNodeId(loose_index_.begin()->second));
      continue;
    }
    PrefixNodeId victim;
    if (!interior_index_.empty()) {
      victim = PrefixNodeId(std::get<2>(*interior_index_.begin()));
    } else {
      victim = pick_leaf(/*prefer_locked=*/true, protect_scratch_);
    }
    BEAM_CHECK(victim.valid()) << "no endpoint to break";
    break_endpoint(victim);
  }
}

void PrefixCache::flush() {
  saving_ = false;
  for (PrefixNodeId v = pick_leaf(false); v.valid(); v = pick_leaf(false)) evict_leaf(v);
  while (!interior_index_.empty()) break_endpoint(PrefixNodeId(std::get<2>(*interior_index_.begin())));
  while (!leaf_endpoints_.empty()) break_endpoint(PrefixNodeId(*leaf_endpoints_.begin()));
  while (!loose_index_.empty()) drop_sliding(PrefixNodeId(loose_index_.begin()->second));
  saving_ = true;
  if (host_ != nullptr) host_->clear();
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s;
  s.num_nodes = num_nodes_;
  s.num_endpoints = num_endpoints_;
  s.num_loose = static_cast<int64_t>(loose_index_.size());
  s.host_restores_unused = host_restores_unused_;
  s.held = {num_nodes_, num_sliding_held_};
  s.evictable = evictable();
  return s;
}

}  // namespace beam
