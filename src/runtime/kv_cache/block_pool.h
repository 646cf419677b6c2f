// BlockPool: the physical blocks of one KV pool — a free list and a reference count per block.
// Owned by KvCacheManager (engine thread). No allocation after construction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/kv_cache/kv_types.h"

namespace beam {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  int64_t num_total() const { return static_cast<int64_t>(refs_.size()); }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_used() const { return num_total() - num_free(); }

  // Takes a free block with one reference. Requires num_free() > 0.
  BlockId allocate();
  // One more holder of an allocated block.
  void add_ref(BlockId block);
  // One holder fewer; the block returns to the free list when none is left.
  void release(BlockId block);
  int32_t ref_count(BlockId block) const;

  // Aborts unless every block's count equals expected_refs[block], free blocks are exactly the
  // ones with count 0, and free + used == total.
  void check_integrity(std::span<const int32_t> expected_refs, const char* pool_name) const;

 private:
  void check_id(BlockId block) const;

  std::vector<int32_t> refs_;  // [num_blocks] holders per block
  std::vector<int32_t> free_;  // stack of free block ids; the next allocation is free_.back()
};

}  // namespace beam
