#include "runtime/structured/regex_mask_cache.h"

#include <bit>

#include "core/check.h"
#include "runtime/structured/vocab_index.h"

namespace beam {

void RegexMaskCache::add_allowed(const VocabIndex& vocab, const ByteDfa& dfa, int32_t state,
                                 std::span<uint32_t> bits) {
  const Entry* entry = find(&dfa, state);
  if (!entry) {  // walked without the lock: other sequences' masks go on meanwhile
    std::vector<uint32_t> walked(bits.size(), 0u);
    vocab.add_allowed(dfa, state, walked);
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= kMaxEntries) {
      for (size_t i = 0; i < bits.size(); ++i) bits[i] |= walked[i];
      return;
    }
    auto made = std::make_unique<const Entry>(entry_of(walked));
    entry = entries_.emplace(std::make_pair(&dfa, state), std::move(made)).first->second.get();
  }
  if (entry->words.empty()) {
    for (int32_t id : entry->ids) set_mask_bit(bits, id);
    return;
  }
  BEAM_CHECK_EQ(entry->words.size(), bits.size()) << "a regex mask memo serves one vocabulary";
  for (size_t i = 0; i < bits.size(); ++i) bits[i] |= entry->words[i];
}

size_t RegexMaskCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

RegexMaskCache::Entry RegexMaskCache::entry_of(const std::vector<uint32_t>& words) {
  size_t allowed = 0;
  for (uint32_t w : words) allowed += static_cast<size_t>(std::popcount(w));
  Entry e;
  if (allowed > kMaxListedTokens) {
    e.words = words;
    return e;
  }
  for (size_t i = 0; i < words.size(); ++i)
    for (uint32_t w = words[i]; w != 0; w &= w - 1)
      e.ids.push_back(static_cast<int32_t>(i * 32 + static_cast<size_t>(std::countr_zero(w))));
  return e;
}

const RegexMaskCache::Entry* RegexMaskCache::find(const ByteDfa* dfa, int32_t state) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(std::make_pair(dfa, state));
  return it == entries_.end() ? nullptr : it->second.get();
}

}  // namespace beam
