// PromptBlockIndex: the prompt blocks a data-parallel replica was sent lately, as chained hashes of
// full blocks, so the cache-aware balancer (LoadBalance::kCacheAware) can tell which replica's
// prefix cache likely holds a new prompt's prefix without asking the replicas (SGLang's router
// keeps an approximate radix tree per worker for the same purpose).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace beam {

// The chained hashes of prompt's full blocks of block_tokens tokens: hash i covers tokens
// [0, (i + 1) * block_tokens) and the namespace `key` (prompt_namespace), so equal hashes mean
// equal prefixes in one prefix-cache namespace (up to 64-bit collisions).
std::vector<uint64_t> prompt_block_chain(std::span<const int32_t> prompt, int64_t block_tokens,
                                         uint64_t key);
// The prefix cache's namespace of a request: its cache salt and LoRA adapter (the adapter's name
// standing for its id: PrefixCache::salt_for_adapter).
uint64_t prompt_namespace(std::string_view cache_salt, std::string_view lora_name);

// Not thread-safe (ReplicaBalancer holds one per replica under its lock).
class PromptBlockIndex {
 public:
  explicit PromptBlockIndex(int64_t capacity_blocks);

  // How many of chain's leading hashes it holds.
  int64_t matched(std::span<const uint64_t> chain) const;
  // Holds every hash of chain as the most recent (its first the most recent of all); past
  // capacity the least recent go.
  void insert(std::span<const uint64_t> chain);
  int64_t size() const { return static_cast<int64_t>(where_.size()); }

 private:
  int64_t capacity_;
  std::list<uint64_t> recent_;  // front: the most recent
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

}  // namespace beam
