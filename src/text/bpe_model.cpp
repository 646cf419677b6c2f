// BPE merge loop and its pair table.
#include "text/bpe_model.h"

#include <algorithm>
#include <bit>
#include <climits>

namespace beam::text {

namespace {

// Words up to this many bytes use the scan; longer ones (whitespace runs, long identifiers) the
// heap, so the cost stays O(n log n).
constexpr size_t kScanMaxSymbols = 64;
// Marks a symbol merged into its left neighbour (unknown bytes are -1 and never merge).
constexpr TokenId kAbsorbed = INT32_MIN;

}  // namespace

Expected<BpeModel> BpeModel::create(std::unordered_map<std::string, TokenId> vocab,
                                    const std::vector<BpeMerge>& merges, Options options) {
  BpeModel m;
  m.options_ = options;
  std::fill(std::begin(m.byte_ids_), std::end(m.byte_ids_), TokenId{-1});
  for (const auto& [bytes, id] : vocab) {
    if (bytes.size() == 1) m.byte_ids_[static_cast<uint8_t>(bytes[0])] = id;
  }
  m.vocab_ = std::move(vocab);
  // Load factor between 0.4 and 0.8: small enough to probe quickly, compact enough for cache.
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, merges.size() * 5 / 4));
  m.pairs_.assign(capacity, PairSlot{kEmptyKey, 0, 0});
  m.mask_ = capacity - 1;
  m.shift_ = 64 - std::countr_zero(capacity);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& merge = merges[rank];
    if (merge.left < 0 || merge.right < 0 || merge.result < 0) {
      return make_error("merge #" + std::to_string(rank) + " has a negative token id");
    }
    const uint64_t key = pair_key(merge.left, merge.right);
    size_t i = (key * 0x9E3779B97F4A7C15ull) >> m.shift_;
    while (m.pairs_[i].key != kEmptyKey && m.pairs_[i].key != key) i = (i + 1) & m.mask_;
    // A repeated pair keeps its last rank, as a map built from the list does.
    m.pairs_[i] = PairSlot{key, static_cast<int32_t>(rank), merge.result};
  }
  m.num_merges_ = merges.size();
  return m;
}

std::optional<TokenId> BpeModel::token_id(std::string_view bytes) const {
  auto it = vocab_.find(std::string(bytes));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_word(std::string_view word, BpeScratch& scratch,
                           std::vector<TokenId>& out) const {
  if (options_.ignore_merges) {
    if (auto id = token_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  std::vector<TokenId>& symbols = scratch.symbols;
  symbols.resize(word.size());
  for (size_t i = 0; i < word.size(); ++i) symbols[i] = byte_ids_[static_cast<uint8_t>(word[i])];
  if (symbols.size() <= kScanMaxSymbols) {
    merge_by_scan(scratch);
  } else {
    merge_by_heap(scratch);
  }
  emit(symbols, out);
}

void BpeModel::emit(const std::vector<TokenId>& symbols, std::vector<TokenId>& out) const {
  bool previous_unknown = false;
  for (TokenId id : symbols) {
    if (id >= 0) {
      out.push_back(id);
      previous_unknown = false;
      continue;
    }
    if (!options_.unk_id) continue;
    if (!(options_.fuse_unk && previous_unknown)) out.push_back(*options_.unk_id);
    previous_unknown = true;
  }
}

// ranks[i] is the rank of pair (symbols[i], symbols[i+1]); after a merge only the two pairs
// touching the merged symbol change.
void BpeModel::merge_by_scan(BpeScratch& scratch) const {
  std::vector<TokenId>& sym = scratch.symbols;
  std::vector<int32_t>& ranks = scratch.ranks;
  size_t n = sym.size();
  if (n < 2) return;
  ranks.resize(n - 1);
  // The table is larger than the CPU caches: issue all initial loads before using any.
  for (size_t i = 0; i + 1 < n; ++i) prefetch_pair(sym[i], sym[i + 1]);
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = pair_rank(sym[i], sym[i + 1]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT32_MAX) break;
    sym[best] = find_pair(sym[best], sym[best + 1])->result;
    sym.erase(sym.begin() + static_cast<ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<ptrdiff_t>(best));
    --n;
    if (best > 0) prefetch_pair(sym[best - 1], sym[best]);
    if (best + 1 < n) prefetch_pair(sym[best], sym[best + 1]);
    if (best > 0) ranks[best - 1] = pair_rank(sym[best - 1], sym[best]);
    if (best + 1 < n) ranks[best] = pair_rank(sym[best], sym[best + 1]);
  }
}

// Symbols form a linked list over their original positions; the heap holds candidate pairs
// keyed by (rank, left position) and stale entries are skipped when popped.
void BpeModel::merge_by_heap(BpeScratch& scratch) const {
  std::vector<TokenId>& sym = scratch.symbols;
  const int32_t n = static_cast<int32_t>(sym.size());
  if (n < 2) return;
  std::vector<int32_t>& prev = scratch.prev;
  std::vector<int32_t>& next = scratch.next;
  prev.resize(n);
  next.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  auto& heap = scratch.heap;
  heap.clear();
  // std heap functions build a max-heap: "greater" puts the lowest (rank, pos) on top.
  auto later = [](const BpeScratch::HeapItem& a, const BpeScratch::HeapItem& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto push = [&](int32_t pos) {
    const int32_t r = pair_rank(sym[pos], sym[next[pos]]);
    if (r == INT32_MAX) return;
    heap.push_back({r, pos});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeScratch::HeapItem top = heap.back();
    heap.pop_back();
    const int32_t pos = top.pos;
    // Stale if the left symbol was absorbed (sym < 0 marks it), has no right neighbour, or the
    // pair changed since the entry was pushed.
    if (sym[pos] == kAbsorbed || next[pos] < 0) continue;
    const int32_t right = next[pos];
    const PairSlot* slot = find_pair(sym[pos], sym[right]);
    if (!slot || slot->rank != top.rank) continue;
    sym[pos] = slot->result;
    sym[right] = kAbsorbed;
    next[pos] = next[right];
    if (next[pos] >= 0) prev[next[pos]] = pos;
    if (prev[pos] >= 0) push(prev[pos]);
    if (next[pos] >= 0) push(pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) sym[out++] = sym[i];
  sym.resize(out);
}

}  // namespace beam::text
