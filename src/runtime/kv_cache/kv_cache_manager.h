// KvCacheManager: the two block pools (full-attention, sliding-window) and every sequence's block
// tables. Sliding tables keep only the blocks a future query can see; older ones go back to the
// pool after each step. One owner: the engine thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "runtime/kv_cache/block_pool.h"
#include "runtime/kv_cache/kv_types.h"

namespace beam {

struct KvCacheConfig {
  int64_t block_size_tokens = 64;
  int64_t sliding_window_tokens = 0;  // W
  int32_t num_full_blocks = 0;
  int32_t num_sliding_blocks = 0;
};

class KvCacheManager {
 public:
  // Validates the config; errors name the field.
  static Expected<KvCacheManager> create(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  int64_t block_size() const { return config_.block_size_tokens; }
  int64_t sliding_window() const { return config_.sliding_window_tokens; }

  // ---- pools ----
  BlockCounts free_blocks() const;
  BlockCounts total_blocks() const;
  BlockCounts used_blocks() const { return total_blocks() - free_blocks(); }
  // For holders other than sequences (the prefix cache).
  // A free block with one reference, the caller's. Requires a free block in the pool.
  BlockId allocate_block(AttentionKind pool) { return pool_mut(pool).allocate(); }
  void add_block_ref(AttentionKind pool, BlockId block) { pool_mut(pool).add_ref(block); }
  void release_block(AttentionKind pool, BlockId block) { pool_mut(pool).release(block); }
  int32_t block_ref_count(AttentionKind pool, BlockId block) const {
    return pool_of(pool).ref_count(block);
  }

  // ---- sequences ----
  void add_sequence(SeqId seq);  // empty tables, nothing computed
  // Drops every block reference of the sequence and forgets it.
  void free_sequence(SeqId seq);
  bool has_sequence(SeqId seq) const { return seqs_.count(seq) != 0; }
  int64_t num_sequences() const { return static_cast<int64_t>(seqs_.size()); }

  // Starts an empty sequence on a cached prefix of num_tokens (block-aligned) tokens: full[i]
  // for every block, sliding[i] for the window blocks [first_visible_block(num_tokens), n) and
  // -1 below. Adds a reference to each block.
  void attach_prefix(SeqId seq, std::span<const int32_t> full, std::span<const int32_t> sliding,
                     int64_t num_tokens);

  int64_t num_computed(SeqId seq) const { return get(seq).num_computed; }
  // Logical block → physical block (int32 for ForwardBatch); sliding entries are -1 where the
  // block slid out of the window. Valid until the next call that changes this sequence.
  std::span<const int32_t> full_table(SeqId seq) const { return get(seq).full; }
  std::span<const int32_t> sliding_table(SeqId seq) const { return get(seq).sliding; }
  // First sliding block the sequence still needs (release_out_of_window frees those before it).
  int64_t first_kept_sliding_block(SeqId seq) const;

  // New blocks reserve(seq, end_slot) would allocate in each pool.
  BlockCounts blocks_needed(SeqId seq, int64_t end_slot) const;
  // Makes both tables cover slots [0, end_slot). Requires blocks_needed() to fit free_blocks().
  void reserve(SeqId seq, int64_t end_slot);
  // num_written more slots hold KV (after the forward). Requires them reserved.
  void advance(SeqId seq, int64_t num_written);
  // Rolls back to num_tokens computed slots (rejected speculative tokens) and frees reserved
  // blocks past them. Requires the sliding window of num_tokens still present.
  void truncate(SeqId seq, int64_t num_tokens);
  // Frees sliding blocks no future query of this sequence can see and that are not needed to
  // cache its block-aligned prefix. Returns the first kept block. Call after every step.
  int64_t release_out_of_window(SeqId seq);

  // Blocks fork(parent, ...) allocates: one per pool when the last block is partially filled.
  BlockCounts fork_cost(SeqId parent) const;
  // child shares the parent's computed blocks; a partially filled last block is given a fresh
  // copy in each pool, appended to *copies for the engine to perform before the next forward.
  void fork(SeqId parent, SeqId child, std::vector<BlockCopy>* copies);

  // Blocks the sequence holds, and those only it holds (freed or cacheable if it goes away).
  BlockCounts held_blocks(SeqId seq) const;
  BlockCounts exclusive_blocks(SeqId seq) const;

  // Aborts unless pool accounting and reference counts match the sequences' tables plus the
  // references `other_refs` (per pool, per block; e.g. the prefix cache's) and every table obeys
  // its window invariants.
  void check_integrity(std::span<const int32_t> other_full_refs,
                       std::span<const int32_t> other_sliding_refs) const;

 private:
  struct Seq {
    std::vector<int32_t> full;
    std::vector<int32_t> sliding;
    int64_t num_computed = 0;
    int64_t release_cursor = 0;  // sliding entries below are -1
  };

  explicit KvCacheManager(const KvCacheConfig& config);
  const Seq& get(SeqId seq) const;
  Seq& get(SeqId seq);
  const BlockPool& pool_of(AttentionKind pool) const;
  BlockPool& pool_mut(AttentionKind pool);
  void check_seq(SeqId id, const Seq& s) const;

  KvCacheConfig config_;
  std::array<BlockPool, 2> pools_;  // [0] full, [1] sliding
  std::unordered_map<SeqId, Seq> seqs_;
};

}  // namespace beam
