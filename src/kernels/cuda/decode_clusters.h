// Where the decode planner (attention.cu) puts its items when the four-warp tensor-core kernel
// runs as clusters of kDecodeCluster CTAs (along the grid's y, one KV head): a split row whose
// items all lie in one cluster folds them there, through the first one's shared memory, instead of
// through global records, a ticket and its last CTA (H200 run 213: that chain is 3.5-4.7 µs of a
// call at 1-8 rows). Pure C++ (no CUDA), so that the CPU tests pin the placement.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace beam::cuda::decode_clusters {

// CTAs of a cluster: a sliding row's window of 512 keys spans 17 tiles unless aligned, so 17
// one-tile splits in items of four, five items (the prefix CTA's landing slots for the other four
// fill the shared memory a four-warp CTA has left).
constexpr int64_t kDecodeCluster = 5;

// One of the plan's items, in the plan's order: its row, whether that row folds in a cluster
// (split over 2..kDecodeCluster items whose records fit the first CTA's kDecodeCluster - 1 landing
// slots), and whether the item holds the row's first splits (the one that folds the row).
struct PlanItem {
  int64_t row;
  bool cluster_row, prefix;
};

// Each item's CTA position (y) and, for a cluster row's items, the position of its prefix item's
// CTA; positions that no item takes are padding.
struct Placement {
  std::vector<int64_t> position;  // per item, in the plan's order
  std::vector<int64_t> leader;    // per item: its row's prefix position, or -1 (not a cluster row)
  int64_t length = 0;             // positions used, a multiple of kDecodeCluster
};

// Cluster rows first, each within one cluster (first fit, in the plan's order), then every other
// item in the plan's order into the positions left, the clusters' free ones first. nullopt when no
// row is a cluster row or the positions exceed `slots` (one item a CTA: the kernel's clusters meet
// once, after their items).
inline std::optional<Placement> place(const std::vector<PlanItem>& items, int64_t slots) {
  if (static_cast<int64_t>(items.size()) > slots) return std::nullopt;
  Placement p;
  p.position.assign(items.size(), -1);
  p.leader.assign(items.size(), -1);
  std::vector<bool> taken;
  const auto take = [&](int64_t pos) {
    if (pos >= static_cast<int64_t>(taken.size()))
      taken.resize(static_cast<size_t>(pos) + 1, false);
    taken[static_cast<size_t>(pos)] = true;
  };
  int64_t cluster = -1, used = kDecodeCluster;  // the cluster being filled and its taken CTAs
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].cluster_row || p.position[i] >= 0) continue;
    std::vector<size_t> row;  // the row's items, in the plan's order
    for (size_t j = i; j < items.size(); ++j)
      if (items[j].row == items[i].row) row.push_back(j);
    const auto n = static_cast<int64_t>(row.size());
    if (used + n > kDecodeCluster) {
      ++cluster;
      used = 0;
    }
    int64_t leader = -1;
    for (int64_t k = 0; k < n; ++k) {
      const size_t j = row[static_cast<size_t>(k)];
      p.position[j] = cluster * kDecodeCluster + used + k;
      take(p.position[j]);
      if (items[j].prefix) leader = p.position[j];
    }
    for (size_t j : row) p.leader[j] = leader;
    used += n;
  }
  if (cluster < 0) return std::nullopt;
  int64_t next = 0;  // the lowest position that may be free
  for (size_t i = 0; i < items.size(); ++i) {
    if (p.position[i] >= 0) continue;
    while (next < static_cast<int64_t>(taken.size()) && taken[static_cast<size_t>(next)]) ++next;
    p.position[i] = next;
    take(next);
  }
  const auto length = static_cast<int64_t>(taken.size());
  p.length = (length + kDecodeCluster - 1) / kDecodeCluster * kDecodeCluster;
  if (p.length > slots) return std::nullopt;
  return p;
}

}  // namespace beam::cuda::decode_clusters
