// PrefixCache eviction: node removal, pruning of useless leaves, eviction indexes, LRU victims.
//
// Policy (why): a cached prefix is only worth something up to its deepest intact window, so
//  - leaves are always endpoints (or locked): a leaf without an intact window is pruned at once;
//  - full-pool pressure trims the least recently used leaf back to its previous endpoint (an
//    earlier turn's end or checkpoint) and re-queues the shortened path as most recent, so
//    pressure shortens every idle session a little instead of dropping the least recent one
//    whole (plain LRU gives zero hits when sessions are revisited round-robin);
//  - sliding-pool pressure first breaks interior endpoints (fallback points), least recently
//    used and shallowest first, then the tails of leaves (LRU), which also trims their blocks.
#include <algorithm>

#include "core/check.h"
#include "runtime/prefix_cache/prefix_cache.h"

namespace beam {

void PrefixCache::reindex(PrefixNodeId id) {
  Node& n = node(id);
  if (n.in_leaf_index) leaf_index_.erase(n.leaf_key);
  if (n.in_endpoint_index) endpoint_index_.erase(n.endpoint_key);
  n.in_leaf_index = n.in_endpoint_index = false;
  if (!n.in_use || id == kRoot || !n.endpoint) return;
  const bool leaf = n.num_children == 0;
  n.endpoint_key = {leaf ? 1 : 0, n.tick, n.depth, id.value};
  endpoint_index_.insert(n.endpoint_key);
  n.in_endpoint_index = true;
  if (leaf && n.full_lock == 0) {
    n.leaf_key = {n.tick, id.value};
    leaf_index_.insert(n.leaf_key);
    n.in_leaf_index = true;
  }
}

void PrefixCache::delete_node(PrefixNodeId id) {
  Node& n = node(id);
  BEAM_CHECK(id != kRoot && n.in_use && n.num_children == 0 && !n.endpoint && n.full_lock == 0 &&
             n.sliding_lock == 0 && n.window_pins == 0)
      << "delete of busy node " << id.value;
  if (n.sliding >= 0) drop_sliding(id);
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

PrefixNodeId PrefixCache::prune(PrefixNodeId id) {
  while (id != kRoot) {
    const Node& n = node(id);
    if (n.num_children > 0 || n.endpoint || n.full_lock > 0) break;
    const PrefixNodeId parent = n.parent;
    delete_node(id);
    reindex(parent);
    id = parent;
  }
  return id;
}

void PrefixCache::evict_leaf(PrefixNodeId id) {
  unmark_endpoint(id);
  const PrefixNodeId survivor = prune(id);
  const Node& s = node(survivor);
  if (survivor != kRoot && s.endpoint && s.num_children == 0 && s.full_lock == 0) touch(survivor);
}

void PrefixCache::break_endpoint(PrefixNodeId id) {
  const Node& n = node(id);
  if (n.num_children == 0 && n.full_lock == 0) {
    evict_leaf(id);
    return;
  }
  unmark_endpoint(id);  // locked or interior: the node stays, its unpinned window goes
}

void PrefixCache::evict_until_free(BlockCounts target_free) {
  BEAM_CHECK(target_free.fits_in(kv_.free_blocks() + evictable()))
      << "prefix cache cannot free " << target_free.full << " full / " << target_free.sliding
      << " sliding blocks (free " << kv_.free_blocks().full << "/" << kv_.free_blocks().sliding
      << ", evictable " << num_evictable_full_ << "/" << num_evictable_sliding_ << ")";
  while (kv_.free_blocks().full < target_free.full) {
    BEAM_CHECK(!leaf_index_.empty()) << "no evictable leaf";
    evict_leaf(PrefixNodeId(leaf_index_.begin()->second));
  }
  while (kv_.free_blocks().sliding < target_free.sliding) {
    BEAM_CHECK(!endpoint_index_.empty()) << "no endpoint to break";
    break_endpoint(PrefixNodeId(std::get<3>(*endpoint_index_.begin())));
  }
}

void PrefixCache::flush() {
  while (!leaf_index_.empty()) evict_leaf(PrefixNodeId(leaf_index_.begin()->second));
  while (!endpoint_index_.empty()) break_endpoint(PrefixNodeId(std::get<3>(*endpoint_index_.begin())));
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s;
  s.num_nodes = num_nodes_;
  s.num_endpoints = num_endpoints_;
  s.held = {num_nodes_, num_sliding_held_};
  s.evictable = evictable();
  return s;
}

}  // namespace beam
