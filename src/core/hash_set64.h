// HashSet64: a set of 64-bit hashes in one flat open-addressed table (linear probing, at most
// half full), for memos of millions of already well-mixed keys where std::unordered_set's node
// per key costs an allocation and a cache miss per lookup. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace beam {

class HashSet64 {
 public:
  // Adds `key`; true when it was not in the set. Keys are used as their own hash: they must be
  // mixed already (e.g. a splitmix64 finalizer's output).
  bool insert(uint64_t key) {
    if (key == 0) {  // 0 marks an empty slot, so it is kept aside
      const bool fresh = !has_zero_;
      has_zero_ = true;
      return fresh;
    }
    if (2 * (size_ + 1) > slots_.size()) grow();
    if (!place(slots_, key)) return false;
    ++size_;
    return true;
  }
  size_t size() const { return size_ + (has_zero_ ? 1 : 0); }

 private:
  // Puts key into table (its size a power of two) unless it is there; true when placed.
  static bool place(std::vector<uint64_t>& table, uint64_t key) {
    const size_t mask = table.size() - 1;
    for (size_t i = static_cast<size_t>(key) & mask;; i = (i + 1) & mask) {
      if (table[i] == key) return false;
      if (table[i] == 0) {
        table[i] = key;
        return true;
      }
    }
  }

  void grow() {
    std::vector<uint64_t> bigger(slots_.empty() ? 1024 : 2 * slots_.size(), 0);
    for (uint64_t key : slots_)
      if (key != 0) place(bigger, key);
    slots_.swap(bigger);
  }

  std::vector<uint64_t> slots_;
  size_t size_ = 0;  // nonzero keys in slots_
  bool has_zero_ = false;
};

}  // namespace beam
