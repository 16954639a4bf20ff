#include "daemon/cache/cache_policy.h"

#include <vector>

#include "gtest/gtest.h"

namespace waste::cache {
namespace {

auto Any() {
  return [](ChunkId) { return true; };
}

TEST(LruPolicyTest, EvictsLeastRecentlyUsedEvictable) {
  auto lru = NewLruPolicy(8);
  for (ChunkId id : {1, 2, 3}) lru->OnInsert(id);
  lru->OnUse(1);
  EXPECT_EQ(lru->PickVictim(Any()), 2);
  EXPECT_EQ(lru->PickVictim([](ChunkId id) { return id != 2; }), 3);
  lru->OnRemove(2);
  EXPECT_EQ(lru->PickVictim(Any()), 3);
  lru->OnRemove(3);
  lru->OnRemove(1);
  EXPECT_EQ(lru->PickVictim(Any()), -1);
}

TEST(LfuPolicyTest, EvictsLeastUsedSinceArrivalTiesToMostRecent) {
  auto lfu = NewLfuPolicy(8);
  for (ChunkId id : {1, 2, 3}) lfu->OnInsert(id);
  lfu->OnUse(1);
  lfu->OnUse(1);
  lfu->OnUse(2);
  lfu->OnUse(3);
  // 2 and 3 were used once; 3 more recently: on a scan it is needed last.
  EXPECT_EQ(lfu->PickVictim(Any()), 3);
  EXPECT_EQ(lfu->PickVictim([](ChunkId id) { return id != 3; }), 2);
  // Counts restart when a chunk comes back.
  lfu->OnRemove(1);
  lfu->OnInsert(1);
  EXPECT_EQ(lfu->PickVictim(Any()), 1);
}

TEST(LfuAgedPolicyTest, PopularityOutlivesEvictionAndAges) {
  auto aged = NewLfuAgedPolicy(8);
  for (ChunkId id : {1, 2}) aged->OnInsert(id);
  for (int i = 0; i < 3; ++i) aged->OnUse(1);
  aged->OnUse(2);
  EXPECT_EQ(aged->PickVictim(Any()), 2);
  // 1 leaves and comes back: its three uses still count.
  aged->OnRemove(1);
  aged->OnInsert(1);
  aged->OnInsert(3);
  aged->OnUse(3);
  // 2 and 3 used once each: the least recent goes.
  EXPECT_EQ(aged->PickVictim(Any()), 2);
  EXPECT_EQ(aged->PickVictim([](ChunkId id) { return id != 2 && id != 3; }), 1);
  // A hotlist's counts seed popularity.
  aged->Seed(4, 10);
  aged->OnInsert(4);
  EXPECT_EQ(aged->PickVictim([](ChunkId id) { return id == 4 || id == 1; }), 1);
}

// The store's view of a dense model's cyclic scan with `slots` slots: hits
// over `rounds` passes over `n` chunks (no prefetch).
int CyclicHits(CachePolicy* policy, int n, int slots, int rounds) {
  std::vector<bool> resident(n, false);
  int used = 0, hits = 0;
  for (int r = 0; r < rounds; ++r) {
    for (ChunkId id = 0; id < n; ++id) {
      if (resident[id]) {
        ++hits;
      } else {
        if (used == slots) {
          ChunkId victim = policy->PickVictim([&](ChunkId c) { return c != id; });
          policy->OnRemove(victim);
          resident[victim] = false;
          --used;
        }
        policy->OnInsert(id);
        resident[id] = true;
        ++used;
      }
      policy->OnUse(id);
    }
  }
  return hits;
}

TEST(CachePolicyTest, CyclicScanLruThrashesLfuKeepsSlotsUseful) {
  auto lru = NewLruPolicy(20);
  auto lfu = NewLfuPolicy(20);
  EXPECT_EQ(CyclicHits(lru.get(), 20, 8, 10), 0);
  // LFU keeps 7 chunks for good and churns one slot: 7 hits per round after
  // the first.
  EXPECT_EQ(CyclicHits(lfu.get(), 20, 8, 10), 7 * 9);
}

TEST(CachePolicyTest, ParseAndName) {
  EXPECT_EQ(*ParsePolicyKind("lru"), PolicyKind::kLru);
  EXPECT_EQ(*ParsePolicyKind("lfu"), PolicyKind::kLfu);
  EXPECT_EQ(*ParsePolicyKind("lfu-aged"), PolicyKind::kLfuAged);
  EXPECT_FALSE(ParsePolicyKind("arc").ok());
  EXPECT_STREQ(NewCachePolicy(PolicyKind::kLru, 1)->Name(), "lru");
  EXPECT_STREQ(PolicyKindName(kDefaultPolicy), "lfu");
}

}  // namespace
}  // namespace waste::cache
