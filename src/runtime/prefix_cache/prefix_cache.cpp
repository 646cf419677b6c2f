// PrefixCache: node storage, hashing, match() and insert().
#include "runtime/prefix_cache/prefix_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/hash_mix.h"

namespace beam {

size_t PrefixCache::ChildKeyHash::operator()(const ChildKey& k) const {
  return static_cast<size_t>(mix64(k.hash ^ (static_cast<uint64_t>(k.parent) * 0x9e3779b97f4a7c15ull)));
}

uint64_t PrefixCache::hash_block(std::span<const int32_t> tokens) {
  uint64_t h = 0x243f6a8885a308d3ull;
  for (int32_t t : tokens) h = mix64(h ^ static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ull;
  return h;
}

uint64_t PrefixCache::child_hash(PrefixNodeId parent, std::span<const int32_t> block,
                                 uint64_t salt) {
  const uint64_t h = hash_block(block);
  return parent == kRoot && salt != 0 ? mix64(h ^ salt) + 0x9e3779b97f4a7c15ull : h;
}

uint64_t PrefixCache::salt_of_text(std::string_view text) {
  if (text.empty()) return 0;
  uint64_t h = 0x13198a2e03707344ull ^ text.size();
  for (unsigned char c : text) h = mix64(h ^ c) + 0x9e3779b97f4a7c15ull;
  return h == 0 ? 1 : h;
}

uint64_t PrefixCache::salt_for_weights(uint64_t salt, uint64_t weights_epoch) {
  if (weights_epoch == 0) return salt;
  const uint64_t h = mix64(salt ^ mix64(weights_epoch + 0x243f6a8885a308d3ull));
  return h == 0 ? 1 : h;
}

uint64_t PrefixCache::salt_for_adapter(uint64_t salt, uint64_t lora_id) {
  if (lora_id == 0) return salt;
  const uint64_t h = mix64(salt ^ mix64(lora_id + 0x452821e638d01377ull));
  return h == 0 ? 1 : h;
}

PrefixCache::CacheScope PrefixCache::scope_of(SeqId seq) const {
  auto it = scopes_.find(seq);
  return it == scopes_.end() ? CacheScope{} : it->second;
}

void PrefixCache::set_scope(SeqId seq, const CacheScope& scope) {
  if (scope == CacheScope{}) {
    scopes_.erase(seq);
  } else {
    scopes_[seq] = scope;
  }
}

void PrefixCache::set_salt(SeqId seq, uint64_t salt) {
  CacheScope scope = scope_of(seq);
  scope.salt = salt;
  set_scope(seq, scope);
}

void PrefixCache::set_token_limit(SeqId seq, int64_t limit) {
  CacheScope scope = scope_of(seq);
  scope.token_limit = std::max<int64_t>(limit, 0);
  set_scope(seq, scope);
}

std::span<const int32_t> PrefixCache::cacheable(SeqId seq, std::span<const int32_t> tokens) const {
  const int64_t limit = scope_of(seq).token_limit;
  return tokens.first(
      static_cast<size_t>(std::min<int64_t>(limit, static_cast<int64_t>(tokens.size()))));
}

Expected<PrefixCache> PrefixCache::create(KvCacheManager& kv, const PrefixCacheConfig& config) {
  const int64_t n = config.checkpoint_interval_tokens;
  if (n < 0 || n % kv.block_size() != 0)
    return make_error("prefix cache: checkpoint_interval_tokens (" + std::to_string(n) +
                      ") must be a non-negative multiple of the KV block size (" +
                      std::to_string(kv.block_size()) + ")");
  return PrefixCache(kv, config);
}

PrefixCache::PrefixCache(KvCacheManager& kv, const PrefixCacheConfig& config)
    : kv_(kv),
      config_(config),
      block_size_(kv.block_size()),
      window_(kv.sliding_window()),
      checkpoint_blocks_(config.checkpoint_interval_tokens / kv.block_size()) {
  BEAM_CHECK(config.checkpoint_interval_tokens >= 0 &&
             config.checkpoint_interval_tokens % block_size_ == 0)
      << "prefix cache checkpoint interval " << config.checkpoint_interval_tokens;
  nodes_.emplace_back();
  nodes_[0].in_use = true;
  nodes_[0].key = ChainKey{0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
  tokens_.resize(static_cast<size_t>(block_size_));
}

std::span<const int32_t> PrefixCache::node_tokens(PrefixNodeId id) const {
  return {tokens_.data() + static_cast<size_t>(id.value) * block_size_,
          static_cast<size_t>(block_size_)};
}

int64_t PrefixCache::window_first(int64_t depth) const {
  return first_visible_block(depth * block_size_, window_, block_size_);
}

PrefixNodeId PrefixCache::find_child(PrefixNodeId parent, std::span<const int32_t> block,
                                     uint64_t salt, bool* collision) const {
  *collision = false;
  auto it = children_.find(ChildKey{parent.value, child_hash(parent, block, salt)});
  if (it == children_.end()) return PrefixNodeId();
  const PrefixNodeId child(it->second);
  if (!std::equal(block.begin(), block.end(), node_tokens(child).begin()) ||
      node(child).salt != (parent == kRoot ? salt : 0)) {
    *collision = true;  // same hash, other tokens or salt: treated as absent, never inserted
    return PrefixNodeId();
  }
  return child;
}

PrefixNodeId PrefixCache::new_node(PrefixNodeId parent, std::span<const int32_t> block,
                                   uint64_t salt, int32_t full) {
  int32_t slot;
  if (!free_nodes_.empty()) {
    slot = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    slot = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
    tokens_.resize(nodes_.size() * static_cast<size_t>(block_size_));
  }
  const PrefixNodeId id(slot);
  Node& n = node(id);
  n = Node{};
  n.parent = parent;
  n.depth = node(parent).depth + 1;
  n.salt = parent == kRoot ? salt : 0;
  n.hash = child_hash(parent, block, n.salt);
  n.key = node(parent).key.extend(n.hash);
  n.full = full;
  n.in_use = true;
  std::copy(block.begin(), block.end(), tokens_.begin() + static_cast<size_t>(slot) * block_size_);
  kv_.add_block_ref(AttentionKind::kFull, BlockId(full));
  BEAM_CHECK(children_.emplace(ChildKey{parent.value, n.hash}, slot).second) << "duplicate child";
  ++node(parent).num_children;
  ++num_nodes_;
  ++num_evictable_full_;
  reindex(parent);
  return id;
}

PrefixMatch PrefixCache::match(std::span<const int32_t> tokens, uint64_t salt) const {
  PrefixMatch best;
  best.epoch = epoch_;
  if (tokens.empty()) return best;
  const int64_t limit = (static_cast<int64_t>(tokens.size()) - 1) / block_size_;
  PrefixNodeId id = kRoot;
  int64_t run = 0;            // consecutive nodes with live sliding blocks ending here
  int64_t unlocked_full = 0;  // unlocked nodes on the path so far
  for (int64_t k = 1; k <= limit; ++k) {
    bool collision = false;
    const PrefixNodeId child =
        find_child(id, tokens.subspan((k - 1) * block_size_, block_size_), salt, &collision);
    if (!child.valid()) break;
    id = child;
    const Node& n = node(id);
    run = n.sliding >= 0 ? run + 1 : 0;
    unlocked_full += n.full_lock == 0;
    if (run >= k - window_first(k)) {
      best.num_tokens = k * block_size_;
      best.endpoint = id;
      best.newly_locked.full = unlocked_full;
    }
  }
  if (best.num_tokens == 0) return best;
  // Sliding blocks of the window that are not locked yet.
  PrefixNodeId w = best.endpoint;
  for (int64_t i = best.num_tokens / block_size_ - 1; i >= window_first(best.num_tokens / block_size_); --i) {
    best.newly_locked.sliding += node(w).sliding_lock == 0;
    w = node(w).parent;
  }
  return best;
}

int64_t PrefixCache::build_path(SeqId seq, std::span<const int32_t> tokens, int64_t num_blocks,
                                bool create) {
  const int64_t B = block_size_;
  const uint64_t salt = salt_of(seq);
  path_.clear();
  PrefixNodeId id = kRoot;
  for (int64_t i = 0; i < num_blocks; ++i) {
    bool collision = false;
    PrefixNodeId child = find_child(id, tokens.subspan(i * B, B), salt, &collision);
    if (collision) return i;
    if (!child.valid()) {
      if (!create) return num_blocks;
      child = new_node(id, tokens.subspan(i * B, B), salt, kv_.full_table(seq)[i]);
      note_use(child);  // inserted unlocked: the sequence's use counts here
    }
    path_.push_back(child);
    id = child;
  }
  return num_blocks;
}

int64_t PrefixCache::insert(SeqId seq, std::span<const int32_t> all_tokens) {
  const std::span<const int32_t> tokens = cacheable(seq, all_tokens);
  const int64_t K =
      std::min<int64_t>(kv_.num_computed(seq), static_cast<int64_t>(tokens.size())) / block_size_;
  const std::span<const int32_t> sliding = kv_.sliding_table(seq);
  // 1. Follow the existing path (create nothing yet).
  const int64_t stop = build_path(seq, tokens, K, /*create=*/false);
  const int64_t m = static_cast<int64_t>(path_.size());
  auto has_sliding = [&](int64_t i) {
    return (i < m && node(path_[i]).sliding >= 0) || sliding[i] >= 0;
  };
  // 2. Deepest point <= stop whose window the tree or the sequence holds.
  int64_t best = 0;
  for (int64_t k = 1, run = 0; k <= stop; ++k) {
    run = has_sliding(k - 1) ? run + 1 : 0;
    if (run >= k - window_first(k)) best = k;
  }
  if (best == 0) return 0;
  // 3. New nodes for the missing blocks (tombstones until an endpoint window covers them), then
  //    the endpoint with its window healed from the sequence's blocks.
  build_path(seq, tokens, best, /*create=*/true);
  for (int64_t i = window_first(best); i < best; ++i)
    if (node(path_[i]).sliding < 0) set_sliding(path_[i], sliding[i]);
  const PrefixNodeId e = path_[best - 1];
  if (!node(e).endpoint) mark_endpoint(e);
  inherit_gap(seq, e);
  touch(e);
  return best * block_size_;
}

}  // namespace beam
