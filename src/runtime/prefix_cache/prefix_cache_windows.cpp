// PrefixCache: holding sliding blocks (set / drop, loose index), lock counts on nodes, and the
// window pins of endpoints.
#include <algorithm>

#include "core/check.h"
#include "runtime/prefix_cache/prefix_cache.h"

namespace beam {

void PrefixCache::reindex_loose(PrefixNodeId id) {
  Node& n = node(id);
  const bool loose = n.in_use && n.sliding >= 0 && n.window_pins == 0 && n.sliding_lock == 0;
  if (loose == n.in_loose_index) return;
  if (loose) {
    n.loose_tick = ++loose_clock_;
    loose_index_.emplace(n.loose_tick, id.value);
  } else {
    loose_index_.erase({n.loose_tick, id.value});
  }
  n.in_loose_index = loose;
}

void PrefixCache::set_sliding(PrefixNodeId id, int32_t block) {
  Node& n = node(id);
  BEAM_CHECK(n.sliding < 0 && n.sliding_lock == 0 && block >= 0)
      << "set_sliding on node " << id.value << " holding " << n.sliding << " with block " << block;
  kv_.add_block_ref(AttentionKind::kSliding, BlockId(block));
  n.sliding = block;
  ++num_sliding_held_;
  ++num_evictable_sliding_;
  reindex_loose(id);
}

void PrefixCache::drop_sliding(PrefixNodeId id) {
  Node& n = node(id);
  BEAM_CHECK(n.sliding >= 0 && n.sliding_lock == 0 && n.window_pins == 0)
      << "drop_sliding on node " << id.value << " in use";
  if (host_ != nullptr && saving_ && host_keeps(n)) save_sliding(id, /*device_keeps=*/false);
  kv_.release_block(AttentionKind::kSliding, BlockId(n.sliding));
  n.sliding = -1;
  n.window_was_pinned = false;
  --num_sliding_held_;
  --num_evictable_sliding_;
  ++epoch_;
  reindex_loose(id);
}

void PrefixCache::swap_full(PrefixNodeId id, int32_t block) {
  Node& n = node(id);
  BEAM_CHECK(n.full_lock == 0) << "swap of a locked full block on node " << id.value;
  kv_.add_block_ref(AttentionKind::kFull, BlockId(block));
  kv_.release_block(AttentionKind::kFull, BlockId(n.full));
  n.full = block;
}

void PrefixCache::add_full_lock(PrefixNodeId id, int delta) {
  Node& n = node(id);
  const bool was_unlocked = n.full_lock == 0;
  n.full_lock += delta;
  if (delta > 0) note_use(id);
  if (n.full_lock > 0) n.restored = false;
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
  reindex_loose(id);
}

bool PrefixCache::window_intact(PrefixNodeId id) const {
  const int32_t depth = node(id).depth;
  PrefixNodeId w = id;
  for (int64_t i = depth - 1; i >= window_first(depth); --i) {
    if (node(w).sliding < 0) return false;
    w = node(w).parent;
  }
  return true;
}

void PrefixCache::mark_endpoint(PrefixNodeId id, bool resumable) {
  Node& e = node(id);
  BEAM_CHECK(!e.endpoint && id != kRoot) << "mark_endpoint on node " << id.value;
  BEAM_CHECK(window_intact(id)) << "endpoint " << id.value << " without an intact window";
  PrefixNodeId w = id;
  const int32_t early = host_ != nullptr && resumable ? write_through_uses() : 0;
  for (int64_t i = e.depth - 1; i >= window_first(e.depth); --i) {
    ++node(w).window_pins;
    if (resumable) node(w).window_was_pinned = true;
    if (early > 0 && node(w).uses >= early) save_sliding(w, /*device_keeps=*/true);
    reindex_loose(w);
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
    --node(w).window_pins;
    reindex_loose(w);  // stays as a loose window until sliding pressure takes it
    w = node(w).parent;
  }
  reindex(id);
}

void PrefixCache::touch(PrefixNodeId id) {
  node(id).tick = ++clock_;
  reindex(id);
}

}  // namespace beam
