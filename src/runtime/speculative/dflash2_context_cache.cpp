// DFlash2ContextCache: longest shared token prefix over a small LRU list.
#include "runtime/speculative/dflash2_context_cache.h"

#include <algorithm>

namespace beam {
namespace {

int64_t held_pages(const DFlash2Context& context) {
  const auto table = context.table();
  return std::count_if(table.begin(), table.end(), [](int32_t page) { return page >= 0; });
}

}  // namespace

void DFlash2ContextCache::put(std::vector<int32_t> tokens,
                              std::shared_ptr<const DFlash2Context> context) {
  const int64_t bytes = context->bytes();
  if (bytes > max_bytes_) return;
  entries_.push_front(Entry{std::move(tokens), std::move(context)});
  bytes_ += bytes;
  while (bytes_ > max_bytes_) {
    bytes_ -= entries_.back().context->bytes();
    entries_.pop_back();
  }
}

std::shared_ptr<DFlash2Context> DFlash2ContextCache::copy_for(std::span<const int32_t> prefix) {
  auto best = entries_.end();
  int64_t best_len = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const auto& t = it->tokens;
    const auto n = std::min(t.size(), prefix.size());
    const auto len = static_cast<int64_t>(
        std::mismatch(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n), prefix.begin()).first -
        t.begin());
    if (len > best_len && it->context->holds_before(len)) {
      best = it;
      best_len = len;
    }
  }
  if (best == entries_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, best);  // most recently used
  // The copy's pages: older contexts make room.
  const DFlash2ContextPool& pool = best->context->pool();
  while (pool.free_pages() < held_pages(*best->context) && entries_.size() > 1) evict_oldest();
  std::shared_ptr<DFlash2Context> copy = best->context->clone();
  copy->truncate(best_len);
  return copy;
}

int64_t DFlash2ContextCache::pages() const {
  int64_t n = 0;
  for (const Entry& e : entries_) n += held_pages(*e.context);
  return n;
}

bool DFlash2ContextCache::evict_oldest() {
  if (entries_.empty()) return false;
  bytes_ -= entries_.back().context->bytes();
  entries_.pop_back();
  return true;
}

}  // namespace beam
