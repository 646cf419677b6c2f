// PatternMaskCache: one request's memo of the tokens a patterned JSON string without length bounds
// allows from each (pattern DFA state, string-lexer phase) met so far. A mask there walks the trie
// with the lexer and the DFA (milliseconds for a near-free pattern such as an e-mail's local
// part); with the memo each key is walked once and later masks copy its bitset, as the free
// strings' per-phase caches do (vocab_index.h). Shared by the request's sequences
// (OutputConstraint) and filled from the engine's mask threads, hence the lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "runtime/structured/token_trie.h"

namespace beam {

class ByteDfa;

struct PatternStringTokens {
  std::vector<uint32_t> inside;  // mask words: tokens that leave the string open
  TokenTrie closing;             // tokens whose quote closes it on a match, by the bytes after it
  int32_t accepting_state = -1;  // a DFA state the closing quote leaves (-1: no closing token)
};

class PatternMaskCache {
 public:
  // At most this many keys are kept (each ~20-100 KB at Beam's vocabulary); past it, get()
  // returns nullptr and the caller walks.
  static constexpr size_t kMaxEntries = 256;

  // The entry of (dfa, state, phase), made by `build` on first use.
  const PatternStringTokens* get(const ByteDfa* dfa, int32_t state, uint8_t phase,
                                 const std::function<PatternStringTokens()>& build);

 private:
  std::mutex mu_;
  std::map<std::tuple<const ByteDfa*, int32_t, uint8_t>, std::unique_ptr<const PatternStringTokens>>
      entries_;
};

}  // namespace beam
