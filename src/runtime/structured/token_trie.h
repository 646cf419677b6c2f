// TokenTrie: a byte trie over token texts in preorder, so a node's subtree is one contiguous
// range of nodes and its tokens one contiguous range of ids. Walked to build token masks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace beam {

class TokenTrie {
 public:
  using NodeIndex = uint32_t;
  static constexpr NodeIndex kRoot = 0;

  // entries: (text, token id); texts may repeat (several ids at one node) and may be empty.
  explicit TokenTrie(std::vector<std::pair<std::string, int32_t>> entries);
  TokenTrie() : TokenTrie(std::vector<std::pair<std::string, int32_t>>{}) {}  // only a root

  size_t num_nodes() const { return bytes_.size(); }
  // The byte on the edge into `node` (0 for the root).
  uint8_t byte(NodeIndex node) const { return bytes_[node]; }
  // One past the last node of node's subtree; children run from node + 1, each next sibling at
  // the previous child's subtree_end.
  NodeIndex subtree_end(NodeIndex node) const { return ends_[node]; }
  // Ids whose text ends exactly at node.
  std::span<const int32_t> tokens_at(NodeIndex node) const {
    return std::span<const int32_t>(ids_).subspan(first_id_[node],
                                                  first_id_[node + 1] - first_id_[node]);
  }
  // Ids of every text in node's subtree (the node's own included).
  std::span<const int32_t> tokens_under(NodeIndex node) const {
    return std::span<const int32_t>(ids_).subspan(first_id_[node],
                                                  first_id_[ends_[node]] - first_id_[node]);
  }

 private:
  void build(std::span<const std::pair<std::string, int32_t>> sorted, size_t depth, uint8_t byte);

  std::vector<uint8_t> bytes_;
  std::vector<NodeIndex> ends_;
  std::vector<uint32_t> first_id_;  // [num_nodes + 1] into ids_
  std::vector<int32_t> ids_;        // preorder
};

}  // namespace beam
