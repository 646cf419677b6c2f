// PromptBlockIndex and the prompt's block chain (prompt_block_index.h).
#include "runtime/prompt_block_index.h"

#include "core/check.h"
#include "core/hash_mix.h"
#include "runtime/prefix_cache/prefix_cache.h"

namespace beam {

std::vector<uint64_t> prompt_block_chain(std::span<const int32_t> prompt, int64_t block_tokens,
                                         uint64_t key) {
  BEAM_CHECK(block_tokens >= 1) << "prompt_block_chain: block of " << block_tokens << " tokens";
  const auto blocks = static_cast<int64_t>(prompt.size()) / block_tokens;
  std::vector<uint64_t> chain(static_cast<size_t>(blocks));
  uint64_t h = mix64(key);
  for (int64_t b = 0; b < blocks; ++b) {
    h = mix64(h ^ PrefixCache::hash_block(prompt.subspan(static_cast<size_t>(b * block_tokens),
                                                         static_cast<size_t>(block_tokens))));
    chain[static_cast<size_t>(b)] = h;
  }
  return chain;
}

uint64_t prompt_namespace(std::string_view cache_salt, std::string_view lora_name) {
  return PrefixCache::salt_for_adapter(PrefixCache::salt_of_text(cache_salt),
                                       PrefixCache::salt_of_text(lora_name));
}

PromptBlockIndex::PromptBlockIndex(int64_t capacity_blocks) : capacity_(capacity_blocks) {
  BEAM_CHECK(capacity_blocks >= 1) << "PromptBlockIndex of " << capacity_blocks << " blocks";
}

int64_t PromptBlockIndex::matched(std::span<const uint64_t> chain) const {
  int64_t n = 0;
  while (n < static_cast<int64_t>(chain.size()) && where_.contains(chain[static_cast<size_t>(n)]))
    ++n;
  return n;
}

void PromptBlockIndex::insert(std::span<const uint64_t> chain) {
  // Last block first, so a prompt's first blocks end the most recent: eviction takes the tails
  // of prefixes before their heads (a match counts leading blocks), as the prefix cache does.
  for (auto r = chain.rbegin(); r != chain.rend(); ++r) {
    const uint64_t h = *r;
    if (auto it = where_.find(h); it != where_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second);
      continue;
    }
    recent_.push_front(h);
    where_.emplace(h, recent_.begin());
    if (size() > capacity_) {
      where_.erase(recent_.back());
      recent_.pop_back();
    }
  }
}

}  // namespace beam
