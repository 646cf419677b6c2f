// The decode planner's placement of items for clustered launches (kernels/cuda/decode_clusters.h):
// a cluster row's items share one cluster of kDecodeCluster CTA positions, its leader is its prefix
// item's position, the other items fill what is left, and plans that exceed the slots or have no
// cluster row are not placed.
#include "kernels/cuda/decode_clusters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace beam::cuda::decode_clusters {
namespace {

constexpr int64_t C = kDecodeCluster;

// `n` items of `row`, the first its prefix.
void add_row(std::vector<PlanItem>& items, int64_t row, int64_t n, bool cluster_row) {
  for (int64_t k = 0; k < n; ++k) items.push_back({row, cluster_row, k == 0});
}

// Positions distinct and inside the length, a multiple of C no larger than the slots; each
// cluster row in one cluster, led by its prefix item; other items without a leader.
void expect_valid(const std::vector<PlanItem>& items, const Placement& p, int64_t slots) {
  ASSERT_EQ(p.position.size(), items.size());
  EXPECT_EQ(p.length % C, 0);
  EXPECT_LE(p.length, slots);
  std::set<int64_t> seen;
  std::map<int64_t, std::set<int64_t>> clusters_of_row;
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_GE(p.position[i], 0);
    EXPECT_LT(p.position[i], p.length);
    EXPECT_TRUE(seen.insert(p.position[i]).second) << "position " << p.position[i] << " twice";
    if (!items[i].cluster_row) {
      EXPECT_EQ(p.leader[i], -1) << "item " << i;
      continue;
    }
    clusters_of_row[items[i].row].insert(p.position[i] / C);
    EXPECT_EQ(p.leader[i] / C, p.position[i] / C) << "item " << i << ": leader in its cluster";
    if (items[i].prefix) {
      EXPECT_EQ(p.leader[i], p.position[i]) << "item " << i;
    }
  }
  for (const auto& [row, clusters] : clusters_of_row)
    EXPECT_EQ(clusters.size(), 1u) << "row " << row << " spans clusters";
}

TEST(DecodeClusters, ClusterIsFiveCtas) {
  EXPECT_EQ(C, 5) << "a 17-tile sliding row's five items (the expectations below)";
}

TEST(DecodeClusters, OneRowOfFiveItemsFillsOneCluster) {
  std::vector<PlanItem> items;
  add_row(items, 0, 5, true);
  const auto p = place(items, 10);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->position, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p->leader, (std::vector<int64_t>{0, 0, 0, 0, 0}));
  EXPECT_EQ(p->length, 5);
}

// Rows of four items (512 keys from slot 0) leave a cluster's fifth CTA free.
TEST(DecodeClusters, RowsOfFourTakeAClusterEach) {
  std::vector<PlanItem> items;
  for (int64_t r = 0; r < 4; ++r) add_row(items, r, 4, true);
  const auto p = place(items, 20);
  ASSERT_TRUE(p.has_value());
  expect_valid(items, *p, 20);
  EXPECT_EQ(p->position,
            (std::vector<int64_t>{0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 15, 16, 17, 18}));
  EXPECT_EQ(p->length, 20);
}

// Rows of 3 and 2 items share a cluster; rows of 3 and 3 do not, and a whole-row item fills the
// first one's free CTAs.
TEST(DecodeClusters, FirstFitAndOtherItemsInTheHoles) {
  std::vector<PlanItem> shared;
  add_row(shared, 0, 3, true);
  add_row(shared, 1, 2, true);
  const auto a = place(shared, 10);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->position, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(a->leader, (std::vector<int64_t>{0, 0, 0, 3, 3}));
  EXPECT_EQ(a->length, 5);
  std::vector<PlanItem> apart;
  add_row(apart, 0, 3, true);
  add_row(apart, 1, 3, true);
  add_row(apart, 2, 1, false);
  const auto b = place(apart, 10);
  ASSERT_TRUE(b.has_value());
  expect_valid(apart, *b, 10);
  EXPECT_EQ(b->position, (std::vector<int64_t>{0, 1, 2, 5, 6, 7, 3}));
  EXPECT_EQ(b->length, 10);
}

// The plan's order puts the longest items first; a row whose prefix item is shorter (a partial
// first split) lists it last, and the leader is still the prefix's position.
TEST(DecodeClusters, LeaderIsThePrefixItem) {
  const std::vector<PlanItem> items = {{7, true, false}, {7, true, false}, {7, true, true}};
  const auto p = place(items, 10);
  ASSERT_TRUE(p.has_value());
  expect_valid(items, *p, 10);
  EXPECT_EQ(p->leader, (std::vector<int64_t>{2, 2, 2}));
}

TEST(DecodeClusters, NotPlacedWithoutClusterRowsOrBeyondTheSlots) {
  std::vector<PlanItem> global;
  add_row(global, 0, 9, false);  // an 8K-key row's nine items
  add_row(global, 1, 1, false);
  EXPECT_FALSE(place(global, 20).has_value());
  std::vector<PlanItem> many;
  for (int64_t r = 0; r < 3; ++r) add_row(many, r, 5, true);  // 15 positions
  EXPECT_FALSE(place(many, 10).has_value());
  EXPECT_TRUE(place(many, 15).has_value());
  std::vector<PlanItem> holes;
  for (int64_t r = 0; r < 3; ++r) add_row(holes, r, 3, true);  // 9 items in 3 clusters
  EXPECT_FALSE(place(holes, 10).has_value());
  EXPECT_TRUE(place(holes, 15).has_value());
}

TEST(DecodeClusters, RandomPlansArePlacedValidly) {
  std::mt19937 rng(5);
  int placed = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<PlanItem> items;
    const int rows = 1 + static_cast<int>(rng() % 8);
    for (int r = 0; r < rows; ++r) {
      const auto n = static_cast<int64_t>(1 + rng() % 7);
      add_row(items, r, n, n > 1 && n <= C && rng() % 4 != 0);
    }
    std::shuffle(items.begin(), items.end(), rng);  // any plan order
    const int64_t slots = C * static_cast<int64_t>(1 + rng() % 6);
    const auto p = place(items, slots);
    if (!p) continue;
    ++placed;
    expect_valid(items, *p, slots);
  }
  EXPECT_GT(placed, 200);
}

}  // namespace
}  // namespace beam::cuda::decode_clusters
