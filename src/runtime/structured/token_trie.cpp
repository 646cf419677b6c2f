#include "runtime/structured/token_trie.h"

#include <algorithm>

namespace beam {

TokenTrie::TokenTrie(std::vector<std::pair<std::string, int32_t>> entries) {
  std::sort(entries.begin(), entries.end());
  build(entries, 0, 0);
  first_id_.push_back(static_cast<uint32_t>(ids_.size()));
}

// Adds the node for the common prefix (length depth) of `sorted`, then its children in byte order.
void TokenTrie::build(std::span<const std::pair<std::string, int32_t>> sorted, size_t depth,
                      uint8_t byte) {
  const NodeIndex self = static_cast<NodeIndex>(bytes_.size());
  bytes_.push_back(byte);
  ends_.push_back(0);
  first_id_.push_back(static_cast<uint32_t>(ids_.size()));
  size_t i = 0;
  for (; i < sorted.size() && sorted[i].first.size() == depth; ++i)
    ids_.push_back(sorted[i].second);
  while (i < sorted.size()) {
    const char c = sorted[i].first[depth];
    size_t j = i;
    while (j < sorted.size() && sorted[j].first[depth] == c) ++j;
    build(sorted.subspan(i, j - i), depth + 1, static_cast<uint8_t>(c));
    i = j;
  }
  ends_[self] = static_cast<NodeIndex>(bytes_.size());
}

}  // namespace beam
