// CompiledCache: a served model's compiled constraints by their text (GBNF / Lark grammars, JSON
// schemas, regexes), each with the mask memo its requests share, so a constraint sent again — RL
// rollouts and agents send the same one with every request — reuses its masks instead of walking
// the vocabulary anew. The least recently used goes first once the capacity is reached. It also
// remembers texts that failed to compile, with their error, so a text refused once (an
// adversarial one may take seconds of the compile budget) is refused at once after. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/structured/byte_dfa.h"
#include "runtime/structured/ebnf_matcher.h"
#include "runtime/structured/json_grammar.h"
#include "runtime/structured/pattern_mask_cache.h"
#include "runtime/structured/regex_mask_cache.h"

namespace beam {

template <typename Compiled, typename Memo>
class CompiledCache {
 public:
  // A memo holds up to ~10 MB of masks at Beam's vocabulary, so the default keeps up to ~160 MB.
  static constexpr size_t kDefaultCapacity = 16;

  struct Entry {
    std::shared_ptr<const Compiled> compiled;
    std::shared_ptr<Memo> memo;
  };

  explicit CompiledCache(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // The entry of `text`: the cached one, else `compiled` (the text's compiled form) with a new
  // memo, which is kept.
  Entry share(const std::string& text, std::shared_ptr<const Compiled> compiled) {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::optional<Entry> hit = find_locked(text)) return *hit;
    Entry entry{std::move(compiled), std::make_shared<Memo>()};
    if (capacity_ == 0) return entry;
    if (lru_.size() >= capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    lru_.emplace_front(text, entry);
    index_.emplace(text, lru_.begin());
    return entry;
  }

  // The cached entry of `text` (now the most recently used), if any: a caller that can look its
  // text up before compiling skips the compile.
  std::optional<Entry> find(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    return find_locked(text);
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lru_.size();
  }

  // At most this many refusals are kept (by two 64-bit hashes and the length of the text, not the
  // text), the oldest going first.
  static constexpr size_t kMaxRefusals = 64;
  // Remembers that `text` does not compile, and why.
  void refuse(const std::string& text, std::string message) {
    const RefusalKey key = refusal_key(text);
    std::lock_guard<std::mutex> lock(mu_);
    if (refusal_locked(key)) return;
    if (refusals_.size() >= kMaxRefusals) refusals_.pop_front();
    refusals_.emplace_back(key, std::move(message));
  }
  // Why `text` did not compile, if refused before.
  std::optional<std::string> refusal(const std::string& text) const {
    const RefusalKey key = refusal_key(text);
    std::lock_guard<std::mutex> lock(mu_);
    return refusal_locked(key);
  }

 private:
  struct RefusalKey {
    uint64_t std_hash;
    uint64_t fnv_hash;
    size_t size;
    bool operator==(const RefusalKey&) const = default;
  };
  static RefusalKey refusal_key(const std::string& text) {
    uint64_t fnv = 0xcbf29ce484222325ull;  // FNV-1a
    for (unsigned char c : text) fnv = (fnv ^ c) * 0x100000001b3ull;
    return {std::hash<std::string>{}(text), fnv, text.size()};
  }
  std::optional<std::string> refusal_locked(const RefusalKey& key) const {
    for (const auto& [k, message] : refusals_)
      if (k == key) return message;
    return std::nullopt;
  }

  // find() under mu_.
  std::optional<Entry> find_locked(const std::string& text) {
    const auto it = index_.find(text);
    if (it == index_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  using List = std::list<std::pair<std::string, Entry>>;  // most recently used first
  mutable std::mutex mu_;
  size_t capacity_;
  List lru_;
  std::unordered_map<std::string, typename List::iterator> index_;
  std::deque<std::pair<RefusalKey, std::string>> refusals_;  // oldest first
};

// Grammars (EbnfGrammar::compile_gbnf_or_lark) with their GrammarMaskCache.
using GrammarCache = CompiledCache<EbnfGrammar, GrammarMaskCache>;
// JSON schemas (JsonGrammar::from_schema, keyed by the schema's JSON text) with the
// PatternMaskCache of their patterned strings.
using SchemaCache = CompiledCache<JsonGrammar, PatternMaskCache>;
// Whole-output regexes (ByteDfa::from_full_match, keyed by the pattern; a guided_choice by the
// alternation it becomes) with their RegexMaskCache.
using RegexCache = CompiledCache<ByteDfa, RegexMaskCache>;

}  // namespace beam
