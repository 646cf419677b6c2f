// WordCache: sharded bounded hash maps.
#include "text/word_cache.h"

namespace beam::text {

WordCache::WordCache(size_t capacity_words, size_t max_word_bytes)
    : shard_capacity_(std::max<size_t>(1, capacity_words / kNumShards)),
      max_word_bytes_(max_word_bytes) {}

bool WordCache::lookup(std::string_view word, std::vector<TokenId>& out) const {
  if (word.size() > max_word_bytes_) return false;
  const size_t hash = Hash()(word);
  Shard& shard = shard_for(hash);
  std::lock_guard lock(shard.mutex);
  auto it = shard.map.find(word);
  if (it == shard.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view word, std::span<const TokenId> ids) const {
  if (word.size() > max_word_bytes_) return;
  const size_t hash = Hash()(word);
  Shard& shard = shard_for(hash);
  std::lock_guard lock(shard.mutex);
  if (shard.map.size() >= shard_capacity_) shard.map.clear();
  shard.map.try_emplace(std::string(word), ids.begin(), ids.end());
}

}  // namespace beam::text
