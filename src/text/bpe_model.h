// The BPE model over raw bytes: a word starts as one symbol per byte and the adjacent pair with
// the lowest merge rank (leftmost on ties) is merged until no pair has a rank, exactly as
// Hugging Face's BPE does over ByteLevel characters. Immutable and thread-safe after create.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "text/token_id.h"

namespace beam::text {

// One merge rule, rank = its index in the merge list: left + right → result.
struct BpeMerge {
  TokenId left;
  TokenId right;
  TokenId result;
};

// The merge available for a pair of adjacent symbols (rank INT32_MAX: none).
struct BpePairMerge {
  int32_t rank = INT32_MAX;
  TokenId result = -1;
};

// Reusable working memory for encode_word (one per thread).
struct BpeScratch {
  std::vector<TokenId> symbols;
  std::vector<BpePairMerge> pair_merges;
  std::vector<int32_t> prev, next;
  struct HeapItem {
    int32_t rank;
    int32_t pos;     // left symbol's original position
    TokenId left;    // the pair's ids when pushed
    TokenId right;
    TokenId result;
  };
  std::vector<HeapItem> heap;
  std::unordered_map<int32_t, std::vector<int32_t>> rank_groups;  // rank → left positions
  std::vector<int32_t> pending_ranks;                              // min-heap of group ranks
};

class BpeModel {
 public:
  struct Options {
    std::optional<TokenId> unk_id;  // emitted for bytes with no vocabulary entry (else dropped)
    bool fuse_unk = false;          // consecutive unknowns become one unk
    bool ignore_merges = false;     // a word that is itself in the vocabulary is one token
  };

  // `vocab` maps the raw bytes of every BPE token to its id; `merges` are in rank order.
  static Expected<BpeModel> create(std::unordered_map<std::string, TokenId> vocab,
                                   const std::vector<BpeMerge>& merges, Options options);

  // Appends the ids of one pre-tokenized word (raw bytes, non-empty) to `out`.
  void encode_word(std::string_view word, BpeScratch& scratch, std::vector<TokenId>& out) const;

  std::optional<TokenId> token_id(std::string_view bytes) const;
  size_t num_merges() const { return num_merges_; }

  // The merge algorithms, exposed so tests can check they agree: a quadratic scan for short
  // words; for long ones rank groups when the merges are monotonic, else a heap. All leave the
  // merged ids of `word` in scratch.symbols.
  void merge_by_scan(std::string_view word, BpeScratch& scratch) const;
  void merge_by_heap(std::string_view word, BpeScratch& scratch) const;
  void merge_by_rank_groups(std::string_view word, BpeScratch& scratch) const;
  // True when every merge that uses a token ranks after every merge that produces it (true of
  // trained BPE). Then merging never creates a pair that ranks below the merge just made.
  bool monotonic() const { return monotonic_; }

 private:
  struct PairSlot {
    uint64_t key;
    int32_t rank;
    TokenId result;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  static uint64_t pair_key(TokenId a, TokenId b) {
    return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b);
  }
  size_t home_slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  // Starts loading the slot of pair (a, b) so that a later find_pair does not wait for memory.
  void prefetch_pair(TokenId a, TokenId b) const {
    __builtin_prefetch(&pairs_[home_slot(pair_key(a, b))]);
  }
  // The slot of pair (a, b), or nullptr when the pair has no merge.
  const PairSlot* find_pair(TokenId a, TokenId b) const {
    if (a < 0 || b < 0) return nullptr;
    const uint64_t key = pair_key(a, b);
    size_t i = home_slot(key);
    while (true) {
      const PairSlot& s = pairs_[i];
      if (s.key == key) return &s;
      if (s.key == kEmptyKey) return nullptr;
      i = (i + 1) & mask_;
    }
  }
  void emit(const std::vector<TokenId>& symbols, std::vector<TokenId>& out) const;
  BpePairMerge pair_merge(TokenId a, TokenId b) const {
    const PairSlot* s = find_pair(a, b);
    return s ? BpePairMerge{s->rank, s->result} : BpePairMerge{};
  }
  // The merge of the single-byte tokens of bytes a and b (dense table).
  const BpePairMerge& byte_pair_merge(uint8_t a, uint8_t b) const { return byte_pairs_[(a << 8) | b]; }
  void init_symbols(std::string_view word, std::vector<TokenId>& symbols) const;
  void link_symbols(int32_t n, BpeScratch& scratch) const;
  bool merges_are_monotonic() const;

  std::unordered_map<std::string, TokenId> vocab_;
  TokenId byte_ids_[256];
  std::vector<PairSlot> pairs_;
  // Every word starts as single bytes, so the first round of lookups hits this 512 KiB table
  // instead of the large hash table.
  std::vector<BpePairMerge> byte_pairs_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t num_merges_ = 0;
  std::vector<BpeMerge> merges_;  // by rank
  bool monotonic_ = false;
  Options options_;
};

}  // namespace beam::text
