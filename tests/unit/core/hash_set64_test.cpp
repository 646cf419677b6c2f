// HashSet64 against std::unordered_set: the same answers for random keys across its growth,
// duplicates, and the key 0 (its empty-slot marker, kept aside).
#include "core/hash_set64.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_set>

namespace beam {
namespace {

TEST(HashSet64, AnswersAsAStandardSetAcrossGrowth) {
  std::mt19937_64 rng(11);
  HashSet64 set;
  std::unordered_set<uint64_t> reference;
  for (int i = 0; i < 200'000; ++i) {
    // Small keys repeat often (duplicates, colliding low bits); large ones rarely.
    const uint64_t key = i % 3 == 0 ? rng() % 5000 : rng();
    EXPECT_EQ(set.insert(key), reference.insert(key).second) << key;
  }
  EXPECT_EQ(set.size(), reference.size());
  for (uint64_t key : reference) EXPECT_FALSE(set.insert(key));
}

TEST(HashSet64, KeepsZeroLikeAnyKey) {
  HashSet64 set;
  EXPECT_TRUE(set.insert(0));
  EXPECT_FALSE(set.insert(0));
  EXPECT_TRUE(set.insert(1024));  // the first table's size: probes from slot 0 too
  EXPECT_FALSE(set.insert(1024));
  EXPECT_EQ(set.size(), 2u);
}

}  // namespace
}  // namespace beam
