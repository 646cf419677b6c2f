// PrefixCache::check_integrity: recomputes every derived quantity of the tree from scratch and
// compares it with the maintained one (tests call it after every operation).
#include <vector>

#include "core/check.h"
#include "runtime/prefix_cache/prefix_cache.h"

namespace beam {

void PrefixCache::check_nodes() const {
  BEAM_CHECK(nodes_[0].in_use && nodes_[0].depth == 0 && !nodes_[0].endpoint) << "root";
  std::vector<int32_t> children(nodes_.size(), 0);
  int64_t num_nodes = 0;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!n.in_use) {
      BEAM_CHECK(!n.in_leaf_set && !n.in_interior_index && !n.in_loose_index)
          << "free node " << i << " indexed";
      continue;
    }
    ++num_nodes;
    const PrefixNodeId id(static_cast<int32_t>(i));
    BEAM_CHECK(n.parent.valid() && node(n.parent).in_use) << "node " << i << " parent";
    BEAM_CHECK_EQ(n.depth, node(n.parent).depth + 1) << "node " << i << " depth";
    BEAM_CHECK(n.depth == 1 || n.salt == 0) << "node " << i << " salt below depth 1";
    BEAM_CHECK_EQ(n.hash, child_hash(n.parent, node_tokens(id), n.salt)) << "node " << i << " hash";
    BEAM_CHECK(n.key == node(n.parent).key.extend(n.hash)) << "node " << i << " chain key";
    auto it = children_.find(ChildKey{n.parent.value, n.hash});
    BEAM_CHECK(it != children_.end() && it->second == id.value) << "node " << i << " child key";
    BEAM_CHECK(n.full >= 0) << "node " << i << " without full block";
    ++children[n.parent.value];
  }
  BEAM_CHECK_EQ(num_nodes, num_nodes_) << "node count";
  BEAM_CHECK_EQ(static_cast<int64_t>(children_.size()), num_nodes_) << "child map size";
  for (size_t i = 0; i < nodes_.size(); ++i)
    BEAM_CHECK(!nodes_[i].in_use || children[i] == nodes_[i].num_children) << "node " << i << " children";
}

void PrefixCache::recount(std::vector<int32_t>* full_lock, std::vector<int32_t>* sliding_lock,
                          std::vector<int32_t>* pins) const {
  for (const auto& [seq, scope] : scopes_)
    BEAM_CHECK(kv_.has_sequence(seq) && scope != CacheScope{} && scope.token_limit >= 0)
        << "cache scope (salt, token limit) of sequence " << seq.value;
  for (const auto& [seq, rec] : locks_) {
    BEAM_CHECK(kv_.has_sequence(seq)) << "lock of sequence " << seq.value << " without KV sequence";
    BEAM_CHECK(node(rec.endpoint).in_use && node(rec.endpoint).depth == rec.depth &&
               rec.sliding_lo >= window_first(rec.depth) && rec.sliding_lo <= rec.depth)
        << "lock record of sequence " << seq.value;
    PrefixNodeId id = rec.endpoint;
    for (int64_t i = rec.depth - 1; i >= 0; --i) {
      ++(*full_lock)[id.value];
      if (i >= rec.sliding_lo) ++(*sliding_lock)[id.value];
      id = node(id).parent;
    }
  }
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& nd = nodes_[i];
    if (!nd.in_use || !nd.endpoint) continue;
    PrefixNodeId w(static_cast<int32_t>(i));
    for (int64_t b = nd.depth - 1; b >= window_first(nd.depth); --b) {
      BEAM_CHECK(node(w).sliding >= 0) << "endpoint " << i << " has a broken window at block " << b;
      ++(*pins)[w.value];
      w = node(w).parent;
    }
  }
}

void PrefixCache::check_node_indexes(size_t i) const {
  const Node& nd = nodes_[i];
  const bool loose = nd.sliding >= 0 && nd.window_pins == 0 && nd.sliding_lock == 0;
  BEAM_CHECK(nd.in_loose_index == loose &&
             loose_index_.count({nd.loose_tick, static_cast<int32_t>(i)}) == (loose ? 1u : 0u))
      << "node " << i << " loose index";
  const bool leaf = nd.num_children == 0;
  BEAM_CHECK(!leaf || nd.endpoint || nd.full_lock > 0) << "leaf " << i << " is no endpoint";
  BEAM_CHECK(nd.in_leaf_set == (leaf && nd.endpoint) && leaf_endpoints_.count(i) == nd.in_leaf_set)
      << "node " << i << " leaf endpoint set";
  BEAM_CHECK(nd.in_interior_index == (!leaf && nd.endpoint)) << "node " << i << " interior index";
  BEAM_CHECK(!nd.in_interior_index ||
             (interior_index_.count(nd.interior_key) &&
              nd.interior_key == interior_key_of(PrefixNodeId(static_cast<int32_t>(i)))))
      << "node " << i << " interior key";
}

void PrefixCache::check_counts() const {
  const size_t n = nodes_.size();
  std::vector<int32_t> full_lock(n, 0), sliding_lock(n, 0), pins(n, 0);
  recount(&full_lock, &sliding_lock, &pins);
  int64_t sliding_held = 0, ev_full = 0, ev_sliding = 0, leaves = 0, endpoints = 0, loose = 0;
  std::vector<int32_t> full_refs(static_cast<size_t>(kv_.total_blocks().full), 0);
  std::vector<int32_t> sliding_refs(static_cast<size_t>(kv_.total_blocks().sliding), 0);
  for (size_t i = 1; i < n; ++i) {
    const Node& nd = nodes_[i];
    if (!nd.in_use) continue;
    BEAM_CHECK(nd.full_lock == full_lock[i] && nd.sliding_lock == sliding_lock[i])
        << "node " << i << " locks " << nd.full_lock << "/" << nd.sliding_lock << " vs records "
        << full_lock[i] << "/" << sliding_lock[i];
    BEAM_CHECK_EQ(nd.window_pins, pins[i]) << "node " << i << " window pins";
    BEAM_CHECK(nd.sliding_lock == 0 || (nd.sliding >= 0 && nd.full_lock > 0))
        << "node " << i << " sliding lock without block or full lock";
    check_node_indexes(i);
    endpoints += nd.endpoint;
    loose += nd.in_loose_index;
    leaves += nd.num_children == 0 && nd.endpoint;
    ev_full += nd.full_lock == 0;
    BEAM_CHECK(nd.full_lock > 0 || kv_.block_ref_count(AttentionKind::kFull, BlockId(nd.full)) == 1)
        << "unlocked node " << i << " shares its full block";
    BEAM_CHECK(++full_refs[nd.full] == 1) << "full block " << nd.full << " in two nodes";
    if (nd.sliding < 0) continue;
    ++sliding_held;
    ev_sliding += nd.sliding_lock == 0;
    BEAM_CHECK(nd.sliding_lock > 0 ||
               kv_.block_ref_count(AttentionKind::kSliding, BlockId(nd.sliding)) == 1)
        << "unlocked node " << i << " shares its sliding block";
    BEAM_CHECK(++sliding_refs[nd.sliding] == 1) << "sliding block " << nd.sliding << " in two nodes";
  }
  BEAM_CHECK_EQ(endpoints, num_endpoints_) << "endpoint count";
  BEAM_CHECK_EQ(static_cast<int64_t>(interior_index_.size() + leaf_endpoints_.size()), num_endpoints_)
      << "endpoint index size";
  BEAM_CHECK_EQ(static_cast<int64_t>(leaf_endpoints_.size()), leaves) << "leaf endpoint set size";
  BEAM_CHECK_EQ(sliding_held, num_sliding_held_) << "sliding blocks held";
  BEAM_CHECK_EQ(loose, static_cast<int64_t>(loose_index_.size())) << "loose index size";
  BEAM_CHECK_EQ(ev_full, num_evictable_full_) << "evictable full blocks";
  BEAM_CHECK_EQ(ev_sliding, num_evictable_sliding_) << "evictable sliding blocks";
  kv_.check_integrity(full_refs, sliding_refs);
}

void PrefixCache::check_integrity() const {
  check_nodes();
  check_counts();
  if (host_ != nullptr) host_->check_integrity();
}

}  // namespace beam
