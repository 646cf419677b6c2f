// BlockPool: free list + reference counts of one KV pool.
#include "runtime/kv_cache/block_pool.h"

#include "core/check.h"

namespace beam {

BlockPool::BlockPool(int32_t num_blocks) : refs_(static_cast<size_t>(num_blocks), 0) {
  BEAM_CHECK(num_blocks >= 0) << "num_blocks " << num_blocks;
  free_.reserve(refs_.size());
  // Lowest ids are handed out first.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void BlockPool::check_id(BlockId block) const {
  BEAM_CHECK(block.value >= 0 && block.value < num_total())
      << "block " << block.value << " outside pool of " << num_total();
}

BlockId BlockPool::allocate() {
  BEAM_CHECK(!free_.empty()) << "KV block pool exhausted (" << num_total() << " blocks)";
  BlockId block(free_.back());
  free_.pop_back();
  refs_[block.value] = 1;
  return block;
}

void BlockPool::add_ref(BlockId block) {
  check_id(block);
  BEAM_CHECK(refs_[block.value] > 0) << "add_ref on free block " << block.value;
  ++refs_[block.value];
}

void BlockPool::release(BlockId block) {
  check_id(block);
  BEAM_CHECK(refs_[block.value] > 0) << "release of free block " << block.value;
  if (--refs_[block.value] == 0) free_.push_back(block.value);
}

int32_t BlockPool::ref_count(BlockId block) const {
  check_id(block);
  return refs_[block.value];
}

void BlockPool::check_integrity(std::span<const int32_t> expected_refs, const char* pool_name) const {
  BEAM_CHECK_EQ(static_cast<int64_t>(expected_refs.size()), num_total()) << pool_name;
  std::vector<char> in_free(refs_.size(), 0);
  for (int32_t b : free_) {
    BEAM_CHECK(b >= 0 && b < num_total()) << pool_name << " free list holds " << b;
    BEAM_CHECK(!in_free[b]) << pool_name << " block " << b << " twice in the free list";
    in_free[b] = 1;
  }
  int64_t num_zero = 0;
  for (size_t b = 0; b < refs_.size(); ++b) {
    BEAM_CHECK(refs_[b] == expected_refs[b])
        << pool_name << " block " << b << " has " << refs_[b] << " refs, holders account for "
        << expected_refs[b];
    BEAM_CHECK((refs_[b] == 0) == static_cast<bool>(in_free[b]))
        << pool_name << " block " << b << " refs " << refs_[b] << " vs free-list membership";
    num_zero += refs_[b] == 0;
  }
  BEAM_CHECK_EQ(num_zero, num_free()) << pool_name << " free + used != total";
}

}  // namespace beam
