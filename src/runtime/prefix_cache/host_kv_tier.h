// HostKvTier: the hierarchical cache's host memory tier (SGLang's HiCache). Blocks the device
// prefix cache evicts (and, by HostWritePolicy, caches) are copied into host slots here and
// loaded back when a later prompt extends a device-cached prefix with them. Entries are keyed by
// a 128-bit chain key of their whole prefix (salt included) and checked against their block's
// tokens, parent key and salt, so a lookup can only go wrong if two different prefixes share 128
// key bits. Each entry may hold a full-pool block and a sliding-pool block; each pool's slots are
// evicted least recently used first, loose blocks (HostRank::kLoose) before resumable ones. The
// copies go through a HostBlockMover (the engine's HostKvStore; a recording fake in tests). One
// owner: the engine thread (with the PrefixCache that feeds it).
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/kv_cache/kv_types.h"

namespace beam {

// Identifies a block-aligned prefix: the chain of its blocks' hashes (salt in the first).
struct ChainKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const ChainKey&) const = default;
  // The key of this prefix extended by a block whose hash (PrefixCache's child hash) is h.
  ChainKey extend(uint64_t h) const;
};

struct ChainKeyHash {
  size_t operator()(const ChainKey& k) const { return static_cast<size_t>(k.hi ^ (k.lo * 0x9e3779b97f4a7c15ull)); }
};

// One block of a cached prefix as the host tier sees it.
struct HostBlockRef {
  ChainKey key;                     // the prefix up to and including this block
  ChainKey parent;                  // the prefix before it
  uint64_t salt = 0;                // first block only: the salt it was cached under
  std::span<const int32_t> tokens;  // the block's tokens [block_size]
};

// Moves one pool's block (every layer of that pool, K and V) between device pools and host slots.
class HostBlockMover {
 public:
  virtual ~HostBlockMover() = default;
  // Host slot `slot` of `pool` = device block `block` (queued before any later device work).
  virtual void save(AttentionKind pool, BlockId block, int32_t slot) = 0;
  // Device block `block` of `pool` = host slot `slot` (queued before any later device work).
  virtual void load(AttentionKind pool, int32_t slot, BlockId block) = 0;
};

// How much a saved block is worth keeping. A write-through copy of a block the device still
// holds only saves a copy at its eviction, so it goes first (an eviction's save of the same block
// ranks it up). Sliding blocks that were never in the window before a resumable point (loose
// windows: a running sequence's old blocks) resume nothing unless a prompt stops exactly there,
// so they go next. A block never displaces one of a higher rank.
enum class HostRank : uint8_t { kDeviceCopy = 0, kLoose = 1, kResumable = 2 };

// When the prefix cache copies its blocks to the host tier (SGLang's --hicache-write-policy).
enum class HostWritePolicy : uint8_t {
  kWriteBack,              // as eviction drops them (one copy per block evicted)
  kWriteThrough,           // also as they are cached (full blocks) and pinned (endpoint windows)
  kWriteThroughSelective,  // only blocks a second sequence used, as that happens (and at eviction)
};
// "write_back", "write_through", "write_through_selective".
const char* host_write_policy_name(HostWritePolicy policy);

struct HostTierStats {
  BlockCounts capacity;  // slots per pool
  BlockCounts used;      // slots holding a block
  BlockCounts saved;     // blocks copied to the host since start
  BlockCounts loaded;    // blocks copied back to the device since start
  int64_t num_entries = 0;
};

class HostKvTier {
 public:
  // slots: host slots per pool (HostKvStore's); mover must outlive the tier.
  HostKvTier(int64_t block_size, BlockCounts slots, HostBlockMover& mover);

  // The entry of ref (key, parent, salt and tokens equal), or -1.
  int32_t find(const HostBlockRef& ref) const;
  // Whether entry holds a block of pool.
  bool holds(int32_t entry, AttentionKind pool) const;
  // Copies device block `block` of `pool` into ref's entry (created when absent) unless it holds
  // one of that pool already (then it only counts as used now, at the higher of both ranks).
  // When no slot is free it takes the lowest-ranked least recently used one, unless that one
  // outranks `rank` (then nothing is saved). A key whose entry has other tokens is left alone.
  // A kDeviceCopy (the device still holds the block) leaves generation() alone: a walk over device
  // and host finds nothing new.
  void save(AttentionKind pool, const HostBlockRef& ref, BlockId block,
            HostRank rank = HostRank::kResumable);
  // Copies entry's block of pool into device block `block`. Requires holds(entry, pool).
  void load(int32_t entry, AttentionKind pool, BlockId block);
  // Marks entry used now (a restore touches its prefix deepest first, so the shallow blocks the
  // deep ones need are evicted after them).
  void touch(int32_t entry);
  // Forgets every entry (the slots' bytes stay until reused).
  void clear();

  bool empty() const { return by_key_.empty(); }
  // Bumped whenever a block the device let go is saved, or everything forgotten (what a walk over
  // device and host can find changed).
  uint64_t generation() const { return generation_; }
  HostTierStats stats() const;
  // Aborts on a broken invariant: key map vs entries, slot ownership and free lists, LRU indexes.
  void check_integrity() const;

 private:
  struct Entry {
    ChainKey key;
    ChainKey parent;
    uint64_t salt = 0;
    int32_t slot[2] = {-1, -1};  // [full, sliding]
    HostRank rank[2] = {HostRank::kResumable, HostRank::kResumable};
    uint64_t tick = 0;
    bool in_use = false;
  };
  static int index(AttentionKind pool) { return pool == AttentionKind::kFull ? 0 : 1; }
  std::span<const int32_t> entry_tokens(int32_t entry) const;
  int32_t new_entry(const HostBlockRef& ref);
  using LruKey = std::tuple<HostRank, uint64_t, int32_t>;  // (rank, tick, entry)
  LruKey lru_key(int32_t entry, int p) const {
    return {entries_[entry].rank[p], entries_[entry].tick, entry};
  }
  // Frees the lowest-ranked least recently used slot of pool (deleting its entry if that was
  // its last slot).
  void evict_one(int p);
  void drop_slot(int32_t entry, int p);

  int64_t block_size_;
  HostBlockMover& mover_;
  std::vector<Entry> entries_;
  std::vector<int32_t> free_entries_;
  std::vector<int32_t> tokens_;  // [entries_.size() * block_size_]
  std::unordered_map<ChainKey, int32_t, ChainKeyHash> by_key_;
  std::vector<int32_t> free_slots_[2];
  int64_t capacity_[2] = {0, 0};
  std::set<LruKey> lru_[2];  // entries holding a block of that pool, eviction order first
  uint64_t clock_ = 0;
  uint64_t generation_ = 0;
  BlockCounts saved_;
  BlockCounts loaded_;
};

}  // namespace beam
