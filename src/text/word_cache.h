// Caches BPE results of pre-tokenized words (raw bytes → token ids). A WordCache is a bounded,
// direct-mapped table used by one thread at a time; a WordCachePool hands caches to concurrent
// encode calls (one lock per call, none per word). Real text repeats words constantly, so most
// words skip the merge loop.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "text/token_id.h"

namespace beam::text {

// One owner thread at a time (WordCachePool enforces it).
class WordCache {
 public:
  // `num_slots` (a power of two) words at most; words longer than kMaxWordBytes are not cached.
  explicit WordCache(size_t num_slots);

  static constexpr size_t kMaxWordBytes = 64;

  // Appends the cached ids of `word` to `out` and returns true, or returns false on a miss.
  bool lookup(std::string_view word, uint64_t hash, std::vector<TokenId>& out) const;
  // Remembers the ids of `word`, replacing whatever shared its slot.
  void insert(std::string_view word, uint64_t hash, std::span<const TokenId> ids);

  static uint64_t hash(std::string_view word);

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;  // into arena_: word bytes, then ids
    uint16_t word_bytes = 0;
    uint16_t num_ids = 0;  // 0 = empty slot (a cached word has at least one id)
  };
  void clear();

  std::vector<Slot> slots_;
  std::vector<char> arena_;  // bounded; cleared with the slots when full
  size_t mask_;
};

// A fixed set of WordCaches shared by the threads that encode with one Tokenizer.
// Thread-safe.
class WordCachePool {
 public:
  WordCachePool(size_t num_caches, size_t slots_per_cache);

  // Exclusive use of one cache for the lifetime of the lease.
  class Lease {
   public:
    Lease(WordCache* cache, std::unique_lock<std::mutex> lock) : cache_(cache), lock_(std::move(lock)) {}
    WordCache& operator*() const { return *cache_; }
    WordCache* operator->() const { return cache_; }

   private:
    WordCache* cache_;
    std::unique_lock<std::mutex> lock_;
  };
  // A free cache if one is idle, else waits for one.
  Lease acquire() const;

 private:
  struct Entry {
    explicit Entry(size_t slots) : cache(slots) {}
    std::mutex mutex;
    WordCache cache;
  };
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace beam::text
