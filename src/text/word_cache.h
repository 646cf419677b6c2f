// A bounded cache from pre-tokenized words (raw bytes) to their BPE token ids, shared by all
// threads that encode with one Tokenizer. Thread-safe: each shard has its own mutex; a shard
// that reaches its capacity is cleared (cheap, and real text re-fills it with frequent words).
#pragma once

#include <array>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/token_id.h"

namespace beam::text {

class WordCache {
 public:
  // Holds at most `capacity_words` words of at most `max_word_bytes` bytes each.
  WordCache(size_t capacity_words, size_t max_word_bytes);

  // Appends the cached ids of `word` to `out`; false (nothing appended) on a miss.
  bool lookup(std::string_view word, std::vector<TokenId>& out) const;
  // Remembers the ids of `word` (ignored for words longer than max_word_bytes).
  void insert(std::string_view word, std::span<const TokenId> ids) const;

  size_t max_word_bytes() const { return max_word_bytes_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<TokenId>, Hash, std::equal_to<>> map;
  };
  static constexpr size_t kNumShards = 16;
  Shard& shard_for(size_t hash) const { return shards_[(hash >> 7) % kNumShards]; }

  size_t shard_capacity_;
  size_t max_word_bytes_;
  mutable std::array<Shard, kNumShards> shards_;
};

}  // namespace beam::text
