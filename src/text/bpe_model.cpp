// BPE merge loop and its pair table.
#include "text/bpe_model.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <functional>

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
  m.merges_ = merges;
  m.monotonic_ = m.merges_are_monotonic();
  m.byte_pairs_.assign(256 * 256, BpePairMerge{});
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) m.byte_pairs_[(a << 8) | b] = m.pair_merge(m.byte_ids_[a], m.byte_ids_[b]);
  }
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
  if (word.size() <= kScanMaxSymbols) {
    merge_by_scan(word, scratch);
  } else if (monotonic_) {
    merge_by_rank_groups(word, scratch);
  } else {
    merge_by_heap(word, scratch);
  }
  emit(scratch.symbols, out);
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

void BpeModel::init_symbols(std::string_view word, std::vector<TokenId>& symbols) const {
  symbols.resize(word.size());
  for (size_t i = 0; i < word.size(); ++i) symbols[i] = byte_ids_[static_cast<uint8_t>(word[i])];
}

void BpeModel::link_symbols(int32_t n, BpeScratch& scratch) const {
  scratch.prev.resize(n);
  scratch.next.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    scratch.prev[i] = i - 1;
    scratch.next[i] = i + 1 < n ? i + 1 : -1;
  }
}

bool BpeModel::merges_are_monotonic() const {
  TokenId max_id = 0;
  for (const BpeMerge& m : merges_) max_id = std::max({max_id, m.left, m.right, m.result});
  std::vector<int32_t> last_created(static_cast<size_t>(max_id) + 1, -1);
  std::vector<int32_t> first_used(static_cast<size_t>(max_id) + 1, INT32_MAX);
  for (size_t r = 0; r < merges_.size(); ++r) {
    const BpeMerge& m = merges_[r];
    const int32_t rank = static_cast<int32_t>(r);
    // A pair listed twice keeps its last rank (as in the pair table); earlier copies never apply.
    if (find_pair(m.left, m.right)->rank != rank) continue;
    last_created[m.result] = std::max(last_created[m.result], rank);
    first_used[m.left] = std::min(first_used[m.left], rank);
    first_used[m.right] = std::min(first_used[m.right], rank);
  }
  for (size_t id = 0; id < last_created.size(); ++id) {
    if (last_created[id] >= 0 && first_used[id] <= last_created[id]) return false;
  }
  return true;
}

// pair_merges[i] is the merge of (symbols[i], symbols[i+1]); after a merge only the two pairs
// touching the merged symbol change.
void BpeModel::merge_by_scan(std::string_view word, BpeScratch& scratch) const {
  std::vector<TokenId>& sym = scratch.symbols;
  std::vector<BpePairMerge>& merges = scratch.pair_merges;
  init_symbols(word, sym);
  size_t n = sym.size();
  if (n < 2) return;
  merges.resize(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) {
    merges[i] = byte_pair_merge(static_cast<uint8_t>(word[i]), static_cast<uint8_t>(word[i + 1]));
  }
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (merges[i].rank < merges[best].rank) best = i;
    }
    if (merges[best].rank == INT32_MAX) break;
    sym[best] = merges[best].result;
    sym.erase(sym.begin() + static_cast<ptrdiff_t>(best) + 1);
    merges.erase(merges.begin() + static_cast<ptrdiff_t>(best));
    --n;
    // The pair table is larger than the CPU caches: start both loads before using either.
    if (best > 0) prefetch_pair(sym[best - 1], sym[best]);
    if (best + 1 < n) prefetch_pair(sym[best], sym[best + 1]);
    if (best > 0) merges[best - 1] = pair_merge(sym[best - 1], sym[best]);
    if (best + 1 < n) merges[best] = pair_merge(sym[best], sym[best + 1]);
  }
}

// Symbols form a linked list over their original positions; the heap holds candidate merges
// keyed by (rank, left position). An entry is stale once either symbol of its pair changed
// (symbols only grow, so equal ids mean the same pair).
void BpeModel::merge_by_heap(std::string_view word, BpeScratch& scratch) const {
  std::vector<TokenId>& sym = scratch.symbols;
  init_symbols(word, sym);
  const int32_t n = static_cast<int32_t>(sym.size());
  if (n < 2) return;
  link_symbols(n, scratch);
  std::vector<int32_t>& prev = scratch.prev;
  std::vector<int32_t>& next = scratch.next;
  using Item = BpeScratch::HeapItem;
  auto& heap = scratch.heap;
  heap.clear();
  // std heap functions build a max-heap: "later" puts the lowest (rank, pos) on top.
  auto later = [](const Item& a, const Item& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  for (int32_t i = 0; i + 1 < n; ++i) {
    const BpePairMerge& m = byte_pair_merge(static_cast<uint8_t>(word[i]), static_cast<uint8_t>(word[i + 1]));
    if (m.rank != INT32_MAX) heap.push_back({m.rank, i, sym[i], sym[i + 1], m.result});
  }
  std::make_heap(heap.begin(), heap.end(), later);
  auto push = [&](int32_t pos) {
    const BpePairMerge m = pair_merge(sym[pos], sym[next[pos]]);
    if (m.rank == INT32_MAX) return;
    heap.push_back({m.rank, pos, sym[pos], sym[next[pos]], m.result});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Item top = heap.back();
    heap.pop_back();
    const int32_t pos = top.pos;
    const int32_t right = next[pos];
    if (sym[pos] != top.left || right < 0 || sym[right] != top.right) continue;
    sym[pos] = top.result;
    sym[right] = kAbsorbed;
    next[pos] = next[right];
    if (next[pos] >= 0) prev[next[pos]] = pos;
    if (prev[pos] >= 0) prefetch_pair(sym[prev[pos]], sym[pos]);
    if (next[pos] >= 0) prefetch_pair(sym[pos], sym[next[pos]]);
    if (prev[pos] >= 0) push(prev[pos]);
    if (next[pos] >= 0) push(pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) sym[out++] = sym[i];
  sym.resize(out);
}

// With monotonic merges the lowest pending rank never decreases and a merge never re-creates its
// own pair, so all pairs of the lowest rank can be merged in one left-to-right pass (leftmost
// first, overlaps resolved as they come) before moving to the next rank: the same order the
// heap would take, with a heap over distinct ranks instead of over every pair.
void BpeModel::merge_by_rank_groups(std::string_view word, BpeScratch& scratch) const {
  std::vector<TokenId>& sym = scratch.symbols;
  init_symbols(word, sym);
  const int32_t n = static_cast<int32_t>(sym.size());
  if (n < 2) return;
  link_symbols(n, scratch);
  std::vector<int32_t>& prev = scratch.prev;
  std::vector<int32_t>& next = scratch.next;
  auto& groups = scratch.rank_groups;
  auto& ranks = scratch.pending_ranks;  // min-heap via std::greater
  groups.clear();
  ranks.clear();
  auto add = [&](int32_t rank, int32_t pos) {
    std::vector<int32_t>& group = groups[rank];
    if (group.empty()) {
      ranks.push_back(rank);
      std::push_heap(ranks.begin(), ranks.end(), std::greater<>());
    }
    group.push_back(pos);
  };
  for (int32_t i = 0; i + 1 < n; ++i) {
    const BpePairMerge& m = byte_pair_merge(static_cast<uint8_t>(word[i]), static_cast<uint8_t>(word[i + 1]));
    if (m.rank != INT32_MAX) add(m.rank, i);
  }
  std::vector<int32_t> positions;
  while (!ranks.empty()) {
    std::pop_heap(ranks.begin(), ranks.end(), std::greater<>());
    const int32_t rank = ranks.back();
    ranks.pop_back();
    auto it = groups.find(rank);
    positions.swap(it->second);
    groups.erase(it);
    std::sort(positions.begin(), positions.end());
    const BpeMerge& merge = merges_[rank];
    for (int32_t pos : positions) {
      const int32_t right = next[pos];
      // Stale if either symbol of the pair changed since it was recorded.
      if (sym[pos] != merge.left || right < 0 || sym[right] != merge.right) continue;
      sym[pos] = merge.result;
      sym[right] = kAbsorbed;
      next[pos] = next[right];
      if (next[pos] >= 0) prev[next[pos]] = pos;
      if (prev[pos] >= 0) {
        const BpePairMerge m = pair_merge(sym[prev[pos]], sym[pos]);
        if (m.rank != INT32_MAX) add(m.rank, prev[pos]);
      }
      if (next[pos] >= 0) {
        const BpePairMerge m = pair_merge(sym[pos], sym[next[pos]]);
        if (m.rank != INT32_MAX) add(m.rank, pos);
      }
    }
    positions.clear();
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) sym[out++] = sym[i];
  sym.resize(out);
}

}  // namespace beam::text
