#include "daemon/memory/pool.h"

#include <cstring>

#include "gtest/gtest.h"

namespace waste::memory {
namespace {

TEST(WeightPoolTest, CarvesPinnedRegionAndAlignedSlots) {
  auto pool = WeightPool::Create(10000, 5000, 3);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const WeightPool& p = **pool;
  EXPECT_EQ(p.pinned_bytes(), 12288u);
  EXPECT_EQ(p.slot_bytes(), 8192u);
  EXPECT_EQ(p.bytes(), 12288u + 3 * 8192u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.pinned()) % (2 << 20), 0u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.slot(i), p.pinned() + 12288 + i * 8192);
    std::memset(p.slot(i), i, p.slot_bytes());  // Writable.
  }
  std::memset(p.pinned(), 7, p.pinned_bytes());
  EXPECT_EQ(p.slot(2)[0], 2);
}

TEST(WeightPoolTest, LargeSlotsFollowTheEqualOnes) {
  auto pool = WeightPool::Create(PoolLayout{4096, 5000, 2, 20000, 2});
  ASSERT_TRUE(pool.ok()) << pool.status();
  const WeightPool& p = **pool;
  EXPECT_EQ(p.n_slots(), 2);
  EXPECT_EQ(p.n_large_slots(), 2);
  EXPECT_EQ(p.large_slot_bytes(), 20480u);
  EXPECT_EQ(p.bytes(), 4096u + 2 * 8192u + 2 * 20480u);
  EXPECT_EQ(p.slot(1), p.pinned() + 4096 + 8192);
  EXPECT_EQ(p.slot(2), p.pinned() + 4096 + 2 * 8192);
  EXPECT_EQ(p.slot(3), p.slot(2) + 20480);
  std::memset(p.slot(3), 3, p.large_slot_bytes());  // The last byte is the pool's.
  EXPECT_EQ(p.slot(3) + p.large_slot_bytes(), p.pinned() + p.bytes());
  EXPECT_FALSE(WeightPool::Create(PoolLayout{0, 4096, 1, 4096, -1}).ok());
}

TEST(WeightPoolTest, NoSlotsWhenEverythingIsPinned) {
  auto pool = WeightPool::Create(1 << 20, 0, 0, {.huge_pages = false});
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ((*pool)->n_slots(), 0);
  EXPECT_FALSE((*pool)->huge_pages());
}

TEST(WeightPoolTest, LockIsAttemptedAndReported) {
  // Small enough for the 8 MiB RLIMIT_MEMLOCK of ordinary users.
  auto pool = WeightPool::Create(1 << 20, 0, 0, {.lock = true});
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_TRUE((*pool)->locked());
}

TEST(WeightPoolTest, ImpossibleSizeIsResourceExhausted) {
  auto pool = WeightPool::Create(uint64_t{1} << 62, 0, 0);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace waste::memory
