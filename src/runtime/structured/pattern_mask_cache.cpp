#include "runtime/structured/pattern_mask_cache.h"

namespace beam {

const PatternStringTokens* PatternMaskCache::get(
    const ByteDfa* dfa, int32_t state, uint8_t phase,
    const std::function<PatternStringTokens()>& build) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_tuple(dfa, state, phase);
  if (auto it = entries_.find(key); it != entries_.end()) return it->second.get();
  if (entries_.size() >= kMaxEntries) return nullptr;
  auto entry = std::make_unique<const PatternStringTokens>(build());
  return entries_.emplace(key, std::move(entry)).first->second.get();
}

}  // namespace beam
