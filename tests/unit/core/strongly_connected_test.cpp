// strongly_connected_components: the components of small graphs, in reverse topological order.
#include "core/strongly_connected.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace beam {
namespace {

std::vector<std::vector<int32_t>> sorted_components(const std::vector<std::vector<int32_t>>& g) {
  std::vector<std::vector<int32_t>> out = strongly_connected_components(g);
  for (auto& c : out) std::sort(c.begin(), c.end());
  return out;
}

TEST(StronglyConnected, ComponentsComeAfterWhatTheyReach) {
  // 0 → 1 → 2 → 1 (a cycle), 2 → 3, 3 → 3 (a self-loop), 4 alone, 5 → 0.
  const std::vector<std::vector<int32_t>> g = {{1}, {2}, {1, 3}, {3}, {}, {0}};
  const auto c = sorted_components(g);
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0], (std::vector<int32_t>{3}));  // the sink first
  EXPECT_EQ(c[1], (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(c[2], (std::vector<int32_t>{0}));
  EXPECT_EQ(c[3], (std::vector<int32_t>{4}));
  EXPECT_EQ(c[4], (std::vector<int32_t>{5}));
  EXPECT_TRUE(strongly_connected_components({}).empty());
}

TEST(StronglyConnected, OneCycleThroughEveryNode) {
  std::vector<std::vector<int32_t>> g(100);
  for (int32_t v = 0; v < 100; ++v) g[static_cast<size_t>(v)] = {(v + 1) % 100};
  const auto c = sorted_components(g);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].size(), 100u);
}

}  // namespace
}  // namespace beam
