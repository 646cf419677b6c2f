// WordCache and WordCachePool.
#include "text/word_cache.h"

#include <cstring>
#include <functional>
#include <thread>

#include "core/check.h"

namespace beam::text {

namespace {

// Arena budget per slot: room for an average word and its ids.
constexpr size_t kArenaBytesPerSlot = 32;

uint64_t mix(uint64_t x) {
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return x;
}

}  // namespace

uint64_t WordCache::hash(std::string_view word) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ word.size();
  size_t i = 0;
  for (; i + 8 <= word.size(); i += 8) {
    uint64_t chunk;
    std::memcpy(&chunk, word.data() + i, 8);
    h = mix(h ^ chunk) * 0x9E3779B97F4A7C15ull;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, word.data() + i, word.size() - i);
  return mix(h ^ tail ^ (uint64_t{word.size()} << 56));
}

WordCache::WordCache(size_t num_slots) : slots_(num_slots), mask_(num_slots - 1) {
  BEAM_CHECK(num_slots > 0 && (num_slots & (num_slots - 1)) == 0) << "num_slots " << num_slots;
  arena_.reserve(num_slots * kArenaBytesPerSlot);
}

void WordCache::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  arena_.clear();
}

bool WordCache::lookup(std::string_view word, uint64_t hash, std::vector<TokenId>& out) const {
  // Two-way set: the word may sit in either slot of its pair.
  const Slot* slot = &slots_[hash & mask_];
  if (slot->hash != hash) slot = &slots_[(hash & mask_) ^ 1];
  const Slot& s = *slot;
  if (s.num_ids == 0 || s.hash != hash || s.word_bytes != word.size()) return false;
  const char* data = arena_.data() + s.offset;
  if (std::memcmp(data, word.data(), word.size()) != 0) return false;
  const size_t old = out.size();
  out.resize(old + s.num_ids);
  std::memcpy(out.data() + old, data + s.word_bytes, s.num_ids * sizeof(TokenId));
  return true;
}

void WordCache::insert(std::string_view word, uint64_t hash, std::span<const TokenId> ids) {
  if (word.size() > kMaxWordBytes || ids.empty() || ids.size() > UINT16_MAX) return;
  const size_t need = word.size() + ids.size_bytes();
  if (arena_.size() + need > arena_.capacity()) clear();
  // Fill an empty slot of the pair, else replace the one that was not used last.
  Slot& first = slots_[hash & mask_];
  Slot& second = slots_[(hash & mask_) ^ 1];
  Slot& s = first.num_ids == 0 ? first : second.num_ids == 0 ? second : (hash >> 63) ? first : second;
  s.hash = hash;
  s.offset = static_cast<uint32_t>(arena_.size());
  s.word_bytes = static_cast<uint16_t>(word.size());
  s.num_ids = static_cast<uint16_t>(ids.size());
  arena_.insert(arena_.end(), word.begin(), word.end());
  const char* id_bytes = reinterpret_cast<const char*>(ids.data());
  arena_.insert(arena_.end(), id_bytes, id_bytes + ids.size_bytes());
}

WordCachePool::WordCachePool(size_t num_caches, size_t slots_per_cache) {
  for (size_t i = 0; i < num_caches; ++i) entries_.push_back(std::make_unique<Entry>(slots_per_cache));
}

WordCachePool::Lease WordCachePool::acquire() const {
  const size_t n = entries_.size();
  const size_t start = std::hash<std::thread::id>()(std::this_thread::get_id()) % n;
  for (size_t k = 0; k < n; ++k) {
    Entry& e = *entries_[(start + k) % n];
    std::unique_lock lock(e.mutex, std::try_to_lock);
    if (lock.owns_lock()) return Lease(&e.cache, std::move(lock));
  }
  Entry& e = *entries_[start];
  return Lease(&e.cache, std::unique_lock(e.mutex));
}

}  // namespace beam::text
