// RegexMaskCache: the memo of a whole-output regex's masks (guided_regex, guided_choice, a
// regular grammar is an EbnfGrammar instead) by DFA state. A mask walks the vocabulary's trie
// with the DFA (~3.5 ms at Beam's vocabulary for a near-free pattern such as `[a-z ,.]+`, per
// sequence and step); the memo walks each state once and later masks copy its words (or, for a
// state that allows few tokens, set their bits: cheaper than the words). Shared by a
// request's sequences (OutputConstraint) and, through the model's RegexCache, by later requests
// with the same pattern; filled from the engine's mask threads, hence the lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

namespace beam {

class ByteDfa;
class VocabIndex;

class RegexMaskCache {
 public:
  // At most this many states are kept (each ~19 KB at Beam's vocabulary); past it, new states
  // walk every time.
  static constexpr size_t kMaxEntries = 256;
  // A state allowing at most this many tokens keeps their ids instead of the mask words.
  static constexpr size_t kMaxListedTokens = 256;

  // ORs into bits (allowed_mask_words(vocab) words) the text tokens of `vocab` that keep `dfa`
  // alive from `state`: the memoized words of (dfa, state), else a walk, which is kept.
  void add_allowed(const VocabIndex& vocab, const ByteDfa& dfa, int32_t state,
                   std::span<uint32_t> bits);

  size_t size() const;

 private:
  // A state's allowed tokens: their ids (few) or the mask words.
  struct Entry {
    std::vector<int32_t> ids;
    std::vector<uint32_t> words;  // empty when ids lists them
  };
  static Entry entry_of(const std::vector<uint32_t>& words);
  // The memoized entry of (dfa, state), or nullptr.
  const Entry* find(const ByteDfa* dfa, int32_t state) const;

  mutable std::mutex mu_;
  std::map<std::pair<const ByteDfa*, int32_t>, std::unique_ptr<const Entry>> entries_;
};

}  // namespace beam
