// LoraRegistry and LoraSlotTable: pinned adapters (SGLang's) count against max_pinned and are
// never a slot's victim; the least recently used unpinned slot is.
#include "runtime/lora_registry.h"

#include <gtest/gtest.h>

namespace beam {
namespace {

TEST(LoraRegistry, PinsAtMostMaxPinnedAdaptersAndNamesThePinnedOnes) {
  LoraRegistry r(/*capacity=*/0, /*max_pinned=*/1);
  ASSERT_TRUE(r.add("a", nullptr, false, /*pinned=*/true).ok());
  const Status second = r.add("b", nullptr, false, /*pinned=*/true);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("at most 1 adapters may be pinned"), std::string::npos);
  EXPECT_NE(second.error().message.find("pinned now: a"), std::string::npos);
  ASSERT_TRUE(r.add("b", nullptr).ok());  // unpinned: fine
  // Replacing the pinned adapter in place pins its successor (it does not count itself).
  ASSERT_TRUE(r.add("a", nullptr, /*replace=*/true, /*pinned=*/true).ok());
  const uint64_t a = r.find("a").value()->id;
  EXPECT_EQ(r.pinned_ids(), std::set<uint64_t>{a});
  ASSERT_TRUE(r.remove("a").ok());
  EXPECT_TRUE(r.pinned_ids().empty());
  EXPECT_TRUE(r.add("b", nullptr, /*replace=*/true, /*pinned=*/true).ok());
  LoraRegistry none(0, /*max_pinned=*/0);  // one slot: nothing may be pinned
  EXPECT_FALSE(none.add("x", nullptr, false, true).ok());
}

TEST(LoraSlotTable, PinnedAdaptersAreNeverTheVictim) {
  LoraSlotTable t(2);
  EXPECT_EQ(t.victim({}), 0);  // empty slots first
  auto a = std::make_shared<LoraEntry>(LoraEntry{"a", nullptr, 1, true});
  auto b = std::make_shared<LoraEntry>(LoraEntry{"b", nullptr, 2, false});
  t.assign(0, a, /*step=*/1);
  EXPECT_EQ(t.victim({}), 1);
  t.assign(1, b, /*step=*/5);
  EXPECT_EQ(t.victim({}), 0);   // least recently used
  EXPECT_EQ(t.victim({1}), 1);  // a pinned: b goes though used later
  EXPECT_EQ(t.victim({1, 2}), std::nullopt);
}

}  // namespace
}  // namespace beam
