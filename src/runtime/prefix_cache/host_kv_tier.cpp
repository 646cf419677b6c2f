// HostKvTier: entries, slots and least-recently-used eviction of the host tier.
#include "runtime/prefix_cache/host_kv_tier.h"

#include <algorithm>

#include "core/check.h"

namespace beam {
namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

}  // namespace

ChainKey ChainKey::extend(uint64_t h) const {
  // Two independent 64-bit chains (different mixers and constants).
  return {mix(hi ^ h) + 0x9e3779b97f4a7c15ull,
          mix((lo + 0x632be59bd9b4e019ull) ^ ((h << 29) | (h >> 35))) ^ 0x85ebca6b0c3b7f2dull};
}

const char* host_write_policy_name(HostWritePolicy policy) {
  switch (policy) {
    case HostWritePolicy::kWriteBack: return "write_back";
    case HostWritePolicy::kWriteThrough: return "write_through";
    case HostWritePolicy::kWriteThroughSelective: return "write_through_selective";
  }
  return "?";
}

HostKvTier::HostKvTier(int64_t block_size, BlockCounts slots, HostBlockMover& mover)
    : block_size_(block_size), mover_(mover) {
  BEAM_CHECK(block_size > 0 && slots.full >= 0 && slots.sliding >= 0) << "host tier sizes";
  capacity_[0] = slots.full;
  capacity_[1] = slots.sliding;
  for (int p = 0; p < 2; ++p)
    for (int32_t s = static_cast<int32_t>(capacity_[p]) - 1; s >= 0; --s) free_slots_[p].push_back(s);
}

std::span<const int32_t> HostKvTier::entry_tokens(int32_t entry) const {
  return {tokens_.data() + static_cast<size_t>(entry) * static_cast<size_t>(block_size_),
          static_cast<size_t>(block_size_)};
}

int32_t HostKvTier::find(const HostBlockRef& ref) const {
  auto it = by_key_.find(ref.key);
  if (it == by_key_.end()) return -1;
  const Entry& e = entries_[it->second];
  const std::span<const int32_t> t = entry_tokens(it->second);
  if (!(e.parent == ref.parent) || e.salt != ref.salt || !std::equal(t.begin(), t.end(), ref.tokens.begin(), ref.tokens.end()))
    return -1;
  return it->second;
}

bool HostKvTier::holds(int32_t entry, AttentionKind pool) const {
  return entries_[entry].slot[index(pool)] >= 0;
}

int32_t HostKvTier::new_entry(const HostBlockRef& ref) {
  int32_t id;
  if (!free_entries_.empty()) {
    id = free_entries_.back();
    free_entries_.pop_back();
  } else {
    id = static_cast<int32_t>(entries_.size());
    entries_.emplace_back();
    tokens_.resize(entries_.size() * static_cast<size_t>(block_size_));
  }
  Entry& e = entries_[id];
  e = Entry{};
  e.key = ref.key;
  e.parent = ref.parent;
  e.salt = ref.salt;
  e.in_use = true;
  std::copy(ref.tokens.begin(), ref.tokens.end(), tokens_.begin() + static_cast<size_t>(id) * block_size_);
  by_key_.emplace(ref.key, id);
  return id;
}

void HostKvTier::drop_slot(int32_t entry, int p) {
  Entry& e = entries_[entry];
  lru_[p].erase(lru_key(entry, p));
  free_slots_[p].push_back(e.slot[p]);
  e.slot[p] = -1;
  if (e.slot[0] < 0 && e.slot[1] < 0) {
    by_key_.erase(e.key);
    e.in_use = false;
    free_entries_.push_back(entry);
  }
}

void HostKvTier::evict_one(int p) {
  BEAM_CHECK(!lru_[p].empty()) << "host tier: no slot to evict";
  drop_slot(std::get<2>(*lru_[p].begin()), p);
}

void HostKvTier::touch(int32_t entry) {
  Entry& e = entries_[entry];
  for (int p = 0; p < 2; ++p)
    if (e.slot[p] >= 0) lru_[p].erase(lru_key(entry, p));
  e.tick = ++clock_;
  for (int p = 0; p < 2; ++p)
    if (e.slot[p] >= 0) lru_[p].insert(lru_key(entry, p));
}

void HostKvTier::save(AttentionKind pool, const HostBlockRef& ref, BlockId block, HostRank rank) {
  BEAM_CHECK(static_cast<int64_t>(ref.tokens.size()) == block_size_) << "host tier: block of "
                                                                     << ref.tokens.size() << " tokens";
  const int p = index(pool);
  if (capacity_[p] == 0) return;
  int32_t entry = find(ref);
  if (entry < 0) {
    if (by_key_.count(ref.key) != 0) return;  // another prefix under the same key: keep it
  } else if (entries_[entry].slot[p] >= 0) {
    Entry& e = entries_[entry];
    if (rank > e.rank[p]) {
      lru_[p].erase(lru_key(entry, p));
      e.rank[p] = rank;
      lru_[p].insert(lru_key(entry, p));
    }
    touch(entry);
    return;
  }
  if (free_slots_[p].empty()) {
    if (std::get<0>(*lru_[p].begin()) > rank) return;  // every held block outranks this one
    evict_one(p);  // before creating the entry, so eviction never deletes the entry being filled
  }
  if (entry < 0) entry = new_entry(ref);
  Entry& e = entries_[entry];
  e.slot[p] = free_slots_[p].back();
  e.rank[p] = rank;
  free_slots_[p].pop_back();
  mover_.save(pool, block, e.slot[p]);
  if (rank != HostRank::kDeviceCopy) ++generation_;
  saved_.of(pool)++;
  lru_[p].insert(lru_key(entry, p));  // indexed under its old tick, which touch() moves
  touch(entry);
}

void HostKvTier::load(int32_t entry, AttentionKind pool, BlockId block) {
  const Entry& e = entries_[entry];
  BEAM_CHECK(e.in_use && e.slot[index(pool)] >= 0) << "host tier: entry " << entry << " holds no block of that pool";
  mover_.load(pool, e.slot[index(pool)], block);
  loaded_.of(pool)++;
}

void HostKvTier::clear() {
  ++generation_;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (!e.in_use) continue;
    for (int p = 0; p < 2; ++p)
      if (e.slot[p] >= 0) drop_slot(static_cast<int32_t>(i), p);
  }
}

HostTierStats HostKvTier::stats() const {
  HostTierStats s;
  s.capacity = {capacity_[0], capacity_[1]};
  s.used = {capacity_[0] - static_cast<int64_t>(free_slots_[0].size()),
            capacity_[1] - static_cast<int64_t>(free_slots_[1].size())};
  s.saved = saved_;
  s.loaded = loaded_;
  s.num_entries = static_cast<int64_t>(by_key_.size());
  return s;
}

void HostKvTier::check_integrity() const {
  std::vector<char> slot_used[2] = {std::vector<char>(static_cast<size_t>(capacity_[0]), 0),
                                    std::vector<char>(static_cast<size_t>(capacity_[1]), 0)};
  int64_t in_use = 0;
  size_t held[2] = {0, 0};
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (!e.in_use) continue;
    ++in_use;
    auto it = by_key_.find(e.key);
    BEAM_CHECK(it != by_key_.end() && it->second == static_cast<int32_t>(i)) << "host entry " << i << " key";
    BEAM_CHECK(e.slot[0] >= 0 || e.slot[1] >= 0) << "host entry " << i << " holds nothing";
    for (int p = 0; p < 2; ++p) {
      if (e.slot[p] < 0) continue;
      ++held[p];
      BEAM_CHECK(e.slot[p] < capacity_[p] && !slot_used[p][e.slot[p]]) << "host slot " << e.slot[p] << " twice";
      slot_used[p][e.slot[p]] = 1;
      BEAM_CHECK(lru_[p].count(lru_key(static_cast<int32_t>(i), p)) == 1)
          << "host entry " << i << " lru";
    }
  }
  BEAM_CHECK_EQ(in_use, static_cast<int64_t>(by_key_.size())) << "host key map size";
  for (int p = 0; p < 2; ++p) {
    BEAM_CHECK_EQ(lru_[p].size(), held[p]) << "host lru size";
    BEAM_CHECK_EQ(static_cast<int64_t>(held[p] + free_slots_[p].size()), capacity_[p]) << "host slots";
    for (int32_t s : free_slots_[p]) BEAM_CHECK(!slot_used[p][s]) << "host slot " << s << " free and used";
  }
}

}  // namespace beam
