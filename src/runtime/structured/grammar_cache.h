// GrammarCache: a served model's compiled grammars by their text, each with the mask memo its
// requests share (GrammarMaskCache), so a grammar sent again — RL rollouts and agents send the same
// one with every request — reuses its masks instead of walking the vocabulary anew. The least
// recently used grammar goes first once the capacity is reached. Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/structured/ebnf_matcher.h"

namespace beam {

class GrammarCache {
 public:
  // Each grammar's memo holds up to 2 x GrammarMaskCache::kMaxEntries masks (~10 MB at Beam's
  // vocabulary), so the default keeps up to ~160 MB.
  static constexpr size_t kDefaultCapacity = 16;

  struct Entry {
    std::shared_ptr<const EbnfGrammar> grammar;
    std::shared_ptr<GrammarMaskCache> masks;
  };

  explicit GrammarCache(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // The entry of `text`: the cached one, else `compiled` (the text's grammar) with a new memo,
  // which is kept.
  Entry share(const std::string& text, std::shared_ptr<const EbnfGrammar> compiled);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  std::list<std::pair<std::string, Entry>> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<std::pair<std::string, Entry>>::iterator> index_;
};

}  // namespace beam
