// PrefixCache::cache_running: caching a running sequence's blocks as it computes them (locked for
// it), adopting the sliding blocks it releases as loose windows, and pinning checkpoints.
#include <algorithm>

#include "core/check.h"
#include "runtime/prefix_cache/prefix_cache.h"

namespace beam {

void PrefixCache::cache_running(SeqId seq, std::span<const int32_t> all_tokens,
                                int64_t prev_computed) {
  const std::span<const int32_t> tokens = cacheable(seq, all_tokens);
  const int64_t B = block_size_;
  const int64_t K = std::min<int64_t>(kv_.num_computed(seq), static_cast<int64_t>(tokens.size())) / B;
  auto it = locks_.find(seq);
  const int64_t d = it == locks_.end() ? 0 : it->second.depth;
  if (K <= d) return;
  const int64_t first_kept = kv_.first_kept_sliding_block(seq);
  release_sliding_below(seq, first_kept);
  const std::span<const int32_t> full = kv_.full_table(seq);
  const std::span<const int32_t> sliding = kv_.sliding_table(seq);
  // Extend the path with blocks [d, k).
  path_.clear();
  PrefixNodeId id = it == locks_.end() ? kRoot : it->second.endpoint;
  const uint64_t salt = salt_of(seq);
  int64_t k = d;
  for (; k < K; ++k) {
    bool collision = false;
    PrefixNodeId child = find_child(id, tokens.subspan(k * B, B), salt, &collision);
    if (collision) break;  // same hash, other tokens: the path stops here for this sequence
    if (!child.valid()) {
      child = new_node(id, tokens.subspan(k * B, B), salt, full[k]);
    } else if (node(child).full != full[k] && node(child).full_lock == 0) {
      // The tree's copy is unused: keep the sequence's, or the copy stays locked beside it.
      swap_full(child, full[k]);
    }
    path_.push_back(child);
    id = child;
  }
  if (k == d) return;
  // Lock the new nodes for the sequence; adopt its sliding blocks where the tree has none (its
  // live window stays sliding-locked, older ones become loose when the sequence releases them).
  for (int64_t i = d; i < k; ++i) {
    const PrefixNodeId n = path_[i - d];
    add_full_lock(n, +1);
    if (node(n).sliding < 0 && sliding[i] >= 0) set_sliding(n, sliding[i]);
    if (i >= first_kept) add_sliding_lock(n, +1);
  }
  const PrefixNodeId old_endpoint = it == locks_.end() ? kRoot : it->second.endpoint;
  if (it == locks_.end()) it = locks_.emplace(seq, LockRecord{}).first;
  it->second.endpoint = path_.back();
  it->second.depth = k;
  it->second.sliding_lo = std::min(first_kept, k);
  if (old_endpoint != kRoot) reindex(old_endpoint);
  reindex(path_.back());
  mark_checkpoints(seq, prev_computed, d);
}

// Pins the window before every checkpoint in (prev_computed, the sequence's cached depth].
// path_ holds the nodes of blocks [first_depth, depth).
void PrefixCache::mark_checkpoints(SeqId seq, int64_t prev_computed, int64_t first_depth) {
  if (checkpoint_blocks_ == 0) return;
  const LockRecord& rec = locks_.at(seq);
  const int64_t N = checkpoint_blocks_ * block_size_;
  for (int64_t q = (prev_computed / N + 1) * N; q <= rec.depth * block_size_; q += N) {
    const int64_t b = q / block_size_;
    if (b <= first_depth) continue;
    const PrefixNodeId e = path_[b - 1 - first_depth];
    if (node(e).endpoint || !window_intact(e)) continue;
    mark_endpoint(e);
    inherit_gap(seq, e);
    touch(e);
  }
}

}  // namespace beam
