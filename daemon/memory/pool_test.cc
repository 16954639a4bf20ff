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
