// DFlash2ContextCache: the drafter contexts of finished sequences with their tokens, so a request
// whose prompt starts with a finished one's text (a conversation's next turn, a shared system
// prompt) starts with the drafter K/V of the positions the prefix cache spared it from computing.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "model/dflash2/dflash2_drafter.h"

namespace beam {

class DFlash2ContextCache {
 public:
  // Keeps contexts while their bytes stay within max_bytes (least recently used dropped first).
  explicit DFlash2ContextCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // A finished sequence's context; `tokens` are its tokens by position (those the context holds
  // were computed from them).
  void put(std::vector<int32_t> tokens, std::shared_ptr<const DFlash2Context> context);
  // A copy (DFlash2Context::clone) of the saved context whose tokens share the longest prefix with
  // `prefix` (`prefix`: a new sequence's tokens that the prefix cache holds), cut to that shared
  // prefix; null when no saved context holds a position of it. Older contexts are dropped while
  // the pool lacks the copy's pages.
  std::shared_ptr<DFlash2Context> copy_for(std::span<const int32_t> prefix);

  // Drops the least recently used context (its pages go back to the pool); false when empty.
  bool evict_oldest();
  // Drops every context.
  void clear() {
    while (evict_oldest()) {
    }
  }

  int64_t bytes() const { return bytes_; }
  // Pool pages the saved contexts hold.
  int64_t pages() const;
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::shared_ptr<const DFlash2Context> context;
  };
  int64_t max_bytes_ = 0;
  int64_t bytes_ = 0;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace beam
