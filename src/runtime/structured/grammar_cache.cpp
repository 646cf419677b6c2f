#include "runtime/structured/grammar_cache.h"

namespace beam {

GrammarCache::Entry GrammarCache::share(const std::string& text,
                                        std::shared_ptr<const EbnfGrammar> compiled) {
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = index_.find(text); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  Entry entry{std::move(compiled), std::make_shared<GrammarMaskCache>()};
  if (capacity_ == 0) return entry;
  if (lru_.size() >= capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(text, entry);
  index_.emplace(text, lru_.begin());
  return entry;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace beam
