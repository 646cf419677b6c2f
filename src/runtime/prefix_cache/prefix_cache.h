// PrefixCache: a radix tree over block-aligned token prefixes. Every node is one block of tokens
// and holds its full-attention KV block, and a sliding-window KV block while it has one (else it
// is a tombstone). Running sequences are cached as they go: the tree adopts the sliding blocks
// they release ("loose" windows, first to go), and pins the windows before "endpoints" (points
// where a cached prefix resumes: session tails, matched points, checkpoints). Lock counts protect
// prefixes in use; eviction is window-aware. A salt (vLLM's cache_salt) keys a prefix's first
// block, so prefixes cached under one salt are matched only under the same salt. One owner: the
// engine thread (with the KvCacheManager it shares blocks with).
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/strong_id.h"
#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/kv_cache/kv_types.h"
#include "runtime/prefix_cache/host_kv_tier.h"

namespace beam {

using PrefixNodeId = StrongId<struct PrefixNodeTag, int32_t>;

// Result of match(): the longest reusable prefix of a prompt.
struct PrefixMatch {
  int64_t num_tokens = 0;     // P: block-aligned, < prompt length, window before P intact
  PrefixNodeId endpoint;      // node of block P/B - 1 (invalid when P == 0)
  uint64_t epoch = 0;         // acquire() requires that nothing was removed from the tree since
  BlockCounts newly_locked;   // blocks acquire() takes off evictable() (unlocked ones it locks)
};

struct PrefixCacheConfig {
  // When > 0 (a multiple of the block size): the window before every multiple of this many
  // tokens a sequence computes is pinned as an endpoint (a "checkpoint"), so a later request can
  // resume there after the loose windows around it were evicted. The tree holds checkpoint
  // windows (evictable), so a running sequence's sliding memory stays bounded.
  int64_t checkpoint_interval_tokens = 0;
};

// What restore_from_host() makes matchable and the device blocks it fills.
struct HostRestore {
  int64_t num_tokens = 0;  // match() finds this prefix afterwards (0: the host tier adds nothing)
  BlockCounts blocks;      // device blocks it loads from the host tier
};

struct PrefixCacheStats {
  int64_t num_nodes = 0;      // cached blocks (full pool)
  int64_t num_endpoints = 0;  // resumable points with a pinned window
  int64_t num_loose = 0;      // sliding blocks no endpoint pins and nobody locks
  // Full blocks restored from the host tier that eviction took again before any sequence used
  // them (since creation): restores that cost a copy each way for nothing.
  int64_t host_restores_unused = 0;
  BlockCounts held;           // blocks the tree holds a reference to
  BlockCounts evictable;      // blocks eviction can return to the pools
};

class PrefixCache {
 public:
  // kv must outlive the cache; block size and window come from it. Error when the checkpoint
  // interval is not a non-negative multiple of the block size.
  static Expected<PrefixCache> create(KvCacheManager& kv, const PrefixCacheConfig& config);
  // As create(), for a config already validated (aborts otherwise).
  explicit PrefixCache(KvCacheManager& kv, const PrefixCacheConfig& config = {});
  const PrefixCacheConfig& config() const { return config_; }

  // Longest prefix P of `tokens` that can be resumed: a multiple of the block size, at most
  // tokens.size() - 1 (the last prompt token is always recomputed, for its logits), with the full
  // blocks [0, P) and the sliding blocks of the window before P (keys P-W+1 .. P-1) cached.
  // Where the path continues but a window was evicted, the match is cut back to the last point
  // whose window is intact. Pure.
  // Only prefixes cached under `salt` (0: none) match.
  PrefixMatch match(std::span<const int32_t> tokens, uint64_t salt = 0) const;
  // The salt of a salt text: 0 for "" (none), else a non-zero 64-bit hash of it.
  static uint64_t salt_of_text(std::string_view text);
  // A 64-bit hash of a token run (a block's key; also the engine's prompt peers' key).
  static uint64_t hash_block(std::span<const int32_t> tokens);
  // The salt of `salt` under the engine's weights_epoch-th weights (the salt itself for the first):
  // prefixes cached under other weights never match.
  static uint64_t salt_for_weights(uint64_t salt, uint64_t weights_epoch);
  // The salt of `salt` for requests of LoRA adapter lora_id (LoraEntry::id; the salt itself for 0,
  // the base model): prefixes cached under another adapter never match.
  static uint64_t salt_for_adapter(uint64_t salt, uint64_t lora_id);
  // The salt (0: none) seq's blocks are cached under from now on: set when it is admitted,
  // inherited by fork children, forgotten by release().
  void set_salt(SeqId seq, uint64_t salt);
  // seq's blocks are cached (cache_running, insert, fork) only within its first `limit` tokens
  // from now on: set when it is admitted, inherited by fork children, forgotten by release().
  // Deterministic GPU inference caches prompt blocks only: a generated token's KV holds the decode
  // kernel's bits, where a prompt holding that token computes the prefill kernel's.
  void set_token_limit(SeqId seq, int64_t limit);

  // Locks the matched prefix for `seq` (full blocks to the root, sliding blocks of the window
  // only) and attaches its blocks to the fresh KV sequence `seq`. Requires match.num_tokens > 0
  // and that no removal happened since match() (commit right after plan).
  void acquire(SeqId seq, const PrefixMatch& match);
  // seq's sliding locks end below `first_kept_block` (it released those blocks). No-op without lock.
  void release_sliding_below(SeqId seq, int64_t first_kept_block);
  // child was just forked from parent (kv.fork): caches the block-aligned prefix they share
  // (parent_tokens: the parent's known tokens) locked for both, so that no block the two share
  // can later sit unlocked in the tree.
  void fork(SeqId parent, SeqId child, std::span<const int32_t> parent_tokens);
  // Drops all of seq's locks and its salt. No-op without either.
  void release(SeqId seq);
  bool holds_lock(SeqId seq) const { return locks_.count(seq) != 0; }
  // Blocks that become evictable when seq's locks go (nodes no other lock holds).
  BlockCounts blocks_locked_only_by(SeqId seq) const;
  // Blocks acquire(match) takes off evictable() once the sequences in `released` dropped their
  // locks (a plan that preempts them and admits `match` must not count those blocks twice).
  BlockCounts newly_locked(const PrefixMatch& match, std::span<const SeqId> released) const;

  // Caches the computed full blocks of `seq` (tokens: all of its known tokens) up to the deepest
  // block boundary whose window the sequence (or the tree) still holds, marks that point as an
  // endpoint and heals tombstones inside its window with the sequence's sliding blocks. Returns
  // the cached prefix length in tokens. The caller frees the KV sequence right after (finish /
  // preempt).
  int64_t insert(SeqId seq, std::span<const int32_t> tokens);
  // A running sequence advanced from `prev_computed` to its current computed length: caches its
  // new whole blocks (within `tokens`, its known tokens) locked for it, adopts the sliding blocks
  // it is about to release as loose windows, and pins checkpoint windows it crossed. Call after
  // the step, after release_sliding_below() and before kv.release_out_of_window(seq).
  void cache_running(SeqId seq, std::span<const int32_t> tokens, int64_t prev_computed);

  // Blocks that eviction can return to the pools (unlocked ones only the tree references).
  BlockCounts evictable() const { return {num_evictable_full_, num_evictable_sliding_}; }
  // Evicts until the pools have `target_free` free blocks. Requires target_free to fit
  // kv.free_blocks() + evictable(). Full pressure trims the leaf of the session expected back
  // last; sliding pressure drops loose windows (oldest first), then interior endpoint windows,
  // then session tails (policy: prefix_cache_eviction.cpp). Leaves in `protect` (prefixes that
  // queued requests match) are trimmed only when nothing else is left.
  void evict_until_free(BlockCounts target_free, std::span<const PrefixNodeId> protect = {});
  // Evicts everything not locked, and forgets the host tier's blocks.
  void flush();

  // ---- hierarchical cache (HostKvTier) ----
  // From now on, blocks go to `tier` (nullptr: none) as `policy` says: every block eviction
  // takes from the tree (full or sliding) is saved first, and with write-through also every full
  // block as it is cached and every endpoint window's sliding block as it is pinned; with
  // write-through-selective only blocks a second sequence used (a lock or an insert counts as a
  // use), as they reach that count and when evicted. tier must outlive the cache.
  void attach_host_tier(HostKvTier* tier, HostWritePolicy policy = HostWritePolicy::kWriteBack) {
    host_ = tier;
    write_policy_ = policy;
  }
  HostKvTier* host_tier() const { return host_; }
  // What restore_from_host(tokens, salt) would do (pure; nothing without a host tier): the
  // deepest point past match()'s whose full blocks and window the device and host hold together.
  HostRestore plan_host_restore(std::span<const int32_t> tokens, uint64_t salt = 0) const;
  // Carries out plan_host_restore: loads the missing blocks into free device blocks and caches
  // them, the deepest point an endpoint (unlocked: eviction may take it back). Requires the plan's
  // blocks free in the pools. Returns the plan it carried out.
  HostRestore restore_from_host(std::span<const int32_t> tokens, uint64_t salt = 0);
  // The tokens of `tokens` that match() would find after restore_from_host (match()'s own without
  // a host tier or with an empty one). Pure.
  int64_t match_with_host(std::span<const int32_t> tokens, uint64_t salt = 0) const;
  // Marks the host tier's blocks of that prefix used now, so that blocks saved next (an eviction
  // making room for its restore) take other slots first.
  void touch_host_prefix(std::span<const int32_t> tokens, uint64_t salt = 0);

  // Bumped whenever a node or a sliding block leaves the tree (PrefixMatch::epoch).
  uint64_t epoch() const { return epoch_; }
  PrefixCacheStats stats() const;
  // Aborts on any broken invariant: tree shape, child keys, lock counts vs lock records, window
  // pins, intact endpoints, leaves are endpoints, eviction indexes, evictable counters, and the
  // KV pools' reference counts (sequences + tree) with free + used == total in both pools.
  void check_integrity() const;

 private:
  // Interior endpoints in sliding-eviction order: shallowest (farthest from the session's tail)
  // first, then least recently used.
  using InteriorKey = std::tuple<int32_t, uint64_t, int32_t>;  // (depth, tick, node)
  struct Node {
    PrefixNodeId parent;
    int32_t depth = 0;        // blocks from the root: the node holds block depth-1
    uint64_t hash = 0;        // of its tokens (and salt)
    ChainKey key;             // of its whole prefix (the host tier's key)
    uint64_t salt = 0;        // depth 1: the salt it was cached under (0: none); deeper: 0
    int32_t full = -1;        // full-pool block
    int32_t sliding = -1;     // sliding-pool block, -1 = tombstone
    int32_t num_children = 0;
    int32_t full_lock = 0;    // lock records whose prefix contains this node
    int32_t sliding_lock = 0; // lock records whose live window contains this node
    int32_t window_pins = 0;  // endpoints whose window contains this node
    bool in_loose_index = false;  // sliding block held, unpinned, unlocked
    uint64_t loose_tick = 0;
    bool window_was_pinned = false;  // its sliding block was in a resumable endpoint's window
    bool endpoint = false;
    bool in_use = false;
    bool restored = false;    // its full block came from the host and no sequence locked it yet
    int32_t uses = 0;         // sequences that locked or inserted it, up to 2 (restored: 1)
    uint64_t tick = 0;        // last use as a match or insert endpoint
    int64_t reuse_gap = -1;   // ticks between the last two uses of this session, -1 unknown
    bool in_interior_index = false;
    bool in_leaf_set = false;
    InteriorKey interior_key{};
  };
  struct LockRecord {
    PrefixNodeId endpoint;
    int64_t depth = 0;        // locked prefix in blocks
    int64_t sliding_lo = 0;   // sliding locks cover blocks [sliding_lo, depth)
    int64_t session_gap = -1; // reuse gap of the matched endpoint, inherited by new endpoints
  };
  struct ChildKey {
    int32_t parent;
    uint64_t hash;
    bool operator==(const ChildKey&) const = default;
  };
  struct ChildKeyHash {
    size_t operator()(const ChildKey& k) const;
  };
  static constexpr PrefixNodeId kRoot{0};
  // One block of a walk over device and host tier (walk_host).
  struct HostStep {
    PrefixNodeId dev;    // the device node, if cached there
    int32_t entry = -1;  // the host tier's entry, or -1
  };

  // A child's key under parent: its block's hash, mixed with the salt below the root only.
  static uint64_t child_hash(PrefixNodeId parent, std::span<const int32_t> block, uint64_t salt);
  // How a sequence's blocks are cached (set_salt, set_token_limit); only sequences whose scope is
  // not the default are stored.
  struct CacheScope {
    uint64_t salt = 0;
    int64_t token_limit = std::numeric_limits<int64_t>::max();
    bool operator==(const CacheScope&) const = default;
  };
  CacheScope scope_of(SeqId seq) const;
  void set_scope(SeqId seq, const CacheScope& scope);
  uint64_t salt_of(SeqId seq) const { return scope_of(seq).salt; }
  // The first tokens of `tokens` that seq's blocks may be cached for (set_token_limit).
  std::span<const int32_t> cacheable(SeqId seq, std::span<const int32_t> tokens) const;
  std::span<const int32_t> node_tokens(PrefixNodeId id) const;
  Node& node(PrefixNodeId id) { return nodes_[id.value]; }
  const Node& node(PrefixNodeId id) const { return nodes_[id.value]; }
  int64_t window_first(int64_t depth) const;  // first block of the window before depth*B
  // `salt` counts below the root only (deeper nodes inherit their path's).
  PrefixNodeId find_child(PrefixNodeId parent, std::span<const int32_t> block, uint64_t salt,
                          bool* collision) const;
  PrefixNodeId new_node(PrefixNodeId parent, std::span<const int32_t> block, uint64_t salt,
                        int32_t full);
  // Follows the path of `tokens` into path_ and, with `create`, extends it with seq's full
  // blocks up to num_blocks. Returns the number of blocks the path may cover: num_blocks, or
  // the block where an existing child has the same hash but other tokens (nothing is created
  // then). Collisions can only be met on existing nodes, so a walk without `create` finds them.
  int64_t build_path(SeqId seq, std::span<const int32_t> tokens, int64_t num_blocks, bool create);
  void swap_full(PrefixNodeId id, int32_t block);
  void mark_checkpoints(SeqId seq, int64_t prev_computed, int64_t first_depth);
  bool window_intact(PrefixNodeId id) const;
  void reindex_loose(PrefixNodeId id);
  void delete_node(PrefixNodeId id);
  // Deletes useless unlocked leaves upward from id; stops at a node that is needed, or whose
  // window is intact (it becomes an endpoint; `evicting`: a fallback point eviction left, whose
  // window keeps its host rank). Returns where it stopped.
  PrefixNodeId prune(PrefixNodeId id, bool evicting);
  void set_sliding(PrefixNodeId id, int32_t block);
  void drop_sliding(PrefixNodeId id);
  void add_full_lock(PrefixNodeId id, int delta);
  void add_sliding_lock(PrefixNodeId id, int delta);
  void lock_path(const LockRecord& rec);
  // Pins id's window. `resumable`: a point prompts resume at (session tails, matches,
  // checkpoints, restores), which ranks its window's blocks on the host; eviction's fallback
  // points are not.
  void mark_endpoint(PrefixNodeId id, bool resumable = true);
  void unmark_endpoint(PrefixNodeId id);
  void touch(PrefixNodeId id);
  void reindex(PrefixNodeId id);
  InteriorKey interior_key_of(PrefixNodeId id) const;
  // Estimated ticks until the leaf's session comes back (larger = evict first).
  uint64_t eviction_score(const Node& leaf) const;
  // Leaf endpoint to trim: unlocked only, or preferring locked ones (sliding pressure); leaves
  // in `protect` only when no other is left.
  PrefixNodeId pick_leaf(bool prefer_locked, std::span<const PrefixNodeId> protect = {}) const;
  void inherit_gap(SeqId seq, PrefixNodeId endpoint);
  // Trims a leaf endpoint; returns the node pruning stopped at.
  PrefixNodeId evict_leaf(PrefixNodeId id);
  void break_endpoint(PrefixNodeId id);
  HostBlockRef host_ref(PrefixNodeId id) const;
  // Uses a node needs before its blocks go to the host ahead of eviction (0: never, write-back).
  int32_t write_through_uses() const;
  // Whether eviction saves the node's blocks to the host tier (all but write-through-selective's
  // single-use blocks).
  bool host_keeps(const Node& n) const;
  // A sequence locked or inserted the node: counts the use, and copies its blocks (full; sliding
  // if held and pinned once) to the host when that makes it reach write_through_uses().
  void note_use(PrefixNodeId id);
  // The node's sliding block to the host tier: a kDeviceCopy for a write-through copy (the tree
  // keeps the block), else ranked by whether it was ever pinned.
  void save_sliding(PrefixNodeId id, bool device_keeps);
  struct HostWalk {
    int64_t depth = 0;         // deepest resumable point, device and host together (in blocks)
    int64_t device_depth = 0;  // the same on the device alone (match()'s)
  };
  // Follows tokens through device nodes and host entries into *steps while each block's full KV
  // is in one of them (nothing when the host tier is empty).
  HostWalk walk_host(std::span<const int32_t> tokens, uint64_t salt, std::vector<HostStep>* steps) const;
  HostRestore count_restore(std::span<const HostStep> steps, int64_t depth) const;
  void touch_host_steps();  // the entries of host_steps_, deepest first
  void check_nodes() const;
  void recount(std::vector<int32_t>* full_lock, std::vector<int32_t>* sliding_lock,
               std::vector<int32_t>* pins) const;
  void check_node_indexes(size_t i) const;
  void check_counts() const;

  KvCacheManager& kv_;
  PrefixCacheConfig config_;
  HostKvTier* host_ = nullptr;
  HostWritePolicy write_policy_ = HostWritePolicy::kWriteBack;
  bool saving_ = true;  // evictions save to host_ (off while flushing)
  int64_t block_size_;
  int64_t window_;
  int64_t checkpoint_blocks_;  // checkpoint interval in blocks, 0 = none
  std::vector<Node> nodes_;    // [0] is the root
  std::vector<int32_t> free_nodes_;
  std::vector<int32_t> tokens_;  // [nodes_.size() * block_size_]: each node's block of tokens
  std::unordered_map<ChildKey, int32_t, ChildKeyHash> children_;
  // Leaf endpoints (locked or not): victims of full-pool pressure, scanned by eviction_score.
  std::set<int32_t> leaf_endpoints_;
  // Interior endpoints (fallback points): victims of sliding-pool pressure after loose windows.
  std::set<InteriorKey> interior_index_;
  // Loose sliding blocks by (loose_tick, node): first victims of sliding-pool pressure.
  std::set<std::pair<uint64_t, int32_t>> loose_index_;
  std::unordered_map<SeqId, LockRecord> locks_;
  std::unordered_map<SeqId, CacheScope> scopes_;  // sequences with a salt or a token limit
  int64_t num_nodes_ = 0;
  int64_t num_endpoints_ = 0;
  int64_t num_sliding_held_ = 0;
  int64_t num_evictable_full_ = 0;
  int64_t num_evictable_sliding_ = 0;
  uint64_t clock_ = 0;
  uint64_t loose_clock_ = 0;
  uint64_t epoch_ = 0;  // bumped whenever a node or a sliding block leaves the tree
  int64_t mean_reuse_gap_ = -1;  // moving average of observed reuse gaps, -1 before the first
  int64_t host_restores_unused_ = 0;
  std::vector<PrefixNodeId> path_;     // scratch of insert() / cache_running()
  std::vector<int32_t> full_scratch_;  // scratch of acquire()
  std::vector<PrefixNodeId> protect_scratch_;  // scratch of evict_until_free()
  std::vector<int32_t> sliding_scratch_;
  std::vector<HostStep> host_steps_;  // scratch of restore_from_host()
};

}  // namespace beam
