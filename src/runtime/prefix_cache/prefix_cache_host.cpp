// PrefixCache and the host tier (HostKvTier): the write policy's saves, and restoring a prefix
// the device and the host hold together.
#include "core/check.h"
#include "runtime/prefix_cache/prefix_cache.h"

namespace beam {

HostBlockRef PrefixCache::host_ref(PrefixNodeId id) const {
  const Node& n = node(id);
  return HostBlockRef{n.key, node(n.parent).key, n.salt, node_tokens(id)};
}

PrefixCache::HostWalk PrefixCache::walk_host(std::span<const int32_t> tokens, uint64_t salt,
                                             std::vector<HostStep>* steps) const {
  steps->clear();
  HostWalk walk;
  if (host_ == nullptr || host_->empty() || tokens.empty()) return walk;
  const int64_t limit = (static_cast<int64_t>(tokens.size()) - 1) / block_size_;
  PrefixNodeId id = kRoot;  // the deepest device node on the path (while it continues there)
  ChainKey key = node(kRoot).key;
  for (int64_t k = 1, run = 0, device_run = 0; k <= limit; ++k) {
    const std::span<const int32_t> block = tokens.subspan((k - 1) * block_size_, block_size_);
    HostStep st;
    if (id.valid()) {
      bool collision = false;
      st.dev = find_child(id, block, salt, &collision);
      if (collision) break;  // another block under this hash: nothing below can be cached
      id = st.dev;
    }
    const uint64_t hash = st.dev.valid() ? node(st.dev).hash
                                         : child_hash(k == 1 ? kRoot : PrefixNodeId(), block, salt);
    const ChainKey next = key.extend(hash);
    // A block the device holds whole (full and sliding) needs nothing from the host.
    if (!st.dev.valid() || node(st.dev).sliding < 0)
      st.entry = host_->find(HostBlockRef{next, key, k == 1 ? salt : 0, block});
    key = next;
    const bool on_host = st.entry >= 0;
    if (!st.dev.valid() && !(on_host && host_->holds(st.entry, AttentionKind::kFull))) break;
    steps->push_back(st);
    const bool sliding = (st.dev.valid() && node(st.dev).sliding >= 0) ||
                         (on_host && host_->holds(st.entry, AttentionKind::kSliding));
    run = sliding ? run + 1 : 0;
    if (run >= k - window_first(k)) walk.depth = k;
    device_run = st.dev.valid() && node(st.dev).sliding >= 0 ? device_run + 1 : 0;
    if (st.dev.valid() && device_run >= k - window_first(k)) walk.device_depth = k;
  }
  return walk;
}

int32_t PrefixCache::write_through_uses() const {
  switch (write_policy_) {
    case HostWritePolicy::kWriteBack: return 0;
    case HostWritePolicy::kWriteThrough: return 1;
    case HostWritePolicy::kWriteThroughSelective: return 2;  // SGLang's threshold for it
  }
  return 0;
}

bool PrefixCache::host_keeps(const Node& n) const {
  return write_policy_ != HostWritePolicy::kWriteThroughSelective || n.uses >= write_through_uses();
}

void PrefixCache::save_sliding(PrefixNodeId id, bool device_keeps) {
  const Node& n = node(id);
  const HostRank rank = device_keeps         ? HostRank::kDeviceCopy
                        : n.window_was_pinned ? HostRank::kResumable
                                              : HostRank::kLoose;
  host_->save(AttentionKind::kSliding, host_ref(id), BlockId(n.sliding), rank);
}

void PrefixCache::note_use(PrefixNodeId id) {
  Node& n = node(id);
  if (n.uses >= 2) return;  // counted up to what a policy asks (a hot prefix is locked endlessly)
  ++n.uses;
  if (host_ == nullptr || n.uses != write_through_uses()) return;
  host_->save(AttentionKind::kFull, host_ref(id), BlockId(n.full), HostRank::kDeviceCopy);
  if (n.sliding >= 0 && n.window_was_pinned) save_sliding(id, /*device_keeps=*/true);
}

HostRestore PrefixCache::count_restore(std::span<const HostStep> steps, int64_t depth) const {
  HostRestore r;
  r.num_tokens = depth * block_size_;
  for (int64_t i = 0; i < depth; ++i) {
    const HostStep& st = steps[static_cast<size_t>(i)];
    r.blocks.full += !st.dev.valid();
    if (i >= window_first(depth)) r.blocks.sliding += !st.dev.valid() || node(st.dev).sliding < 0;
  }
  return r;
}

HostRestore PrefixCache::plan_host_restore(std::span<const int32_t> tokens, uint64_t salt) const {
  if (host_ == nullptr) return {};
  std::vector<HostStep> steps;
  const HostWalk walk = walk_host(tokens, salt, &steps);
  if (walk.depth <= walk.device_depth) return {};
  return count_restore(steps, walk.depth);
}

int64_t PrefixCache::match_with_host(std::span<const int32_t> tokens, uint64_t salt) const {
  if (host_ == nullptr || host_->empty()) return match(tokens, salt).num_tokens;
  std::vector<HostStep> steps;
  return walk_host(tokens, salt, &steps).depth * block_size_;
}

HostRestore PrefixCache::restore_from_host(std::span<const int32_t> tokens, uint64_t salt) {
  if (host_ == nullptr) return {};
  const HostWalk walk = walk_host(tokens, salt, &host_steps_);
  if (walk.depth <= walk.device_depth) return {};
  const int64_t depth = walk.depth;
  const HostRestore r = count_restore(host_steps_, depth);
  BEAM_CHECK(r.blocks.fits_in(kv_.free_blocks()))
      << "host restore needs " << r.blocks.full << "/" << r.blocks.sliding << " blocks, "
      << kv_.free_blocks().full << "/" << kv_.free_blocks().sliding << " free";
  // Full blocks along the path (new nodes below the device's deepest), then the window's
  // sliding blocks; each allocation's reference passes to the tree.
  PrefixNodeId parent = kRoot;
  for (int64_t i = 0; i < depth; ++i) {
    HostStep& st = host_steps_[static_cast<size_t>(i)];
    if (!st.dev.valid()) {
      const BlockId b = kv_.allocate_block(AttentionKind::kFull);
      host_->load(st.entry, AttentionKind::kFull, b);
      st.dev = new_node(parent, tokens.subspan(i * block_size_, block_size_), salt, b.value);
      node(st.dev).restored = true;
      node(st.dev).uses = 1;  // the host holds it: a sequence used it before
      kv_.release_block(AttentionKind::kFull, b);
    }
    parent = st.dev;
  }
  for (int64_t i = window_first(depth); i < depth; ++i) {
    const HostStep& st = host_steps_[static_cast<size_t>(i)];
    if (node(st.dev).sliding >= 0) continue;
    const BlockId b = kv_.allocate_block(AttentionKind::kSliding);
    host_->load(st.entry, AttentionKind::kSliding, b);
    set_sliding(st.dev, b.value);
    kv_.release_block(AttentionKind::kSliding, b);
  }
  const PrefixNodeId e = host_steps_[static_cast<size_t>(depth - 1)].dev;
  if (!node(e).endpoint) mark_endpoint(e);
  touch(e);
  touch_host_steps();
  return r;
}

void PrefixCache::touch_host_prefix(std::span<const int32_t> tokens, uint64_t salt) {
  if (host_ == nullptr) return;
  walk_host(tokens, salt, &host_steps_);
  touch_host_steps();
}

void PrefixCache::touch_host_steps() {
  for (auto it = host_steps_.rbegin(); it != host_steps_.rend(); ++it)  // deepest first: the
    if (it->entry >= 0) host_->touch(it->entry);                        // shallow stay longest
}

}  // namespace beam
