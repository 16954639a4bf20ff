#include "daemon/kernels/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace waste::kernels {
namespace {

// Every index in [0, n) visited exactly once, ranges respect min_chunk.
void ExpectCoversOnce(ThreadPool& pool, int64_t n, int64_t min_chunk) {
  std::vector<std::atomic<int>> hits(n);
  std::atomic<int64_t> short_chunks{0};
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        ASSERT_LT(begin, end);
        if (end - begin < min_chunk && end != n) short_chunks.fetch_add(1);
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      },
      min_chunk);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  EXPECT_EQ(short_chunks.load(), 0);
}

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000, 4099}) {
      for (int64_t min_chunk : {1, 3, 100}) ExpectCoversOnce(pool, n, min_chunk);
    }
  }
}

TEST(ThreadPoolTest, ManyBackToBackLoops) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int iter = 0; iter < 20000; ++iter) {
    pool.ParallelFor(64, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  }
  EXPECT_EQ(total.load(), 20000 * 64);
}

TEST(ThreadPoolTest, WakesSleepingWorkers) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int iter = 0; iter < 20; ++iter) {
    // Longer than the spin window, so the worker is asleep on the futex.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    pool.ParallelFor(1000, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  }
  EXPECT_EQ(total.load(), 20 * 1000);
}

TEST(ThreadPoolTest, WorkersReallyRunInParallel) {
  ThreadPool pool(2);
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  pool.ParallelFor(8, [&](int64_t, int64_t) {
    const int now = inside.fetch_add(1) + 1;
    int prev = max_inside.load();
    while (now > prev && !max_inside.compare_exchange_weak(prev, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    inside.fetch_sub(1);
  });
  EXPECT_EQ(max_inside.load(), 2);
}

TEST(ThreadPoolTest, CallerWaitsForSlowWorker) {
  ThreadPool pool(2);
  std::vector<int> out(2, 0);
  pool.ParallelFor(2, [&](int64_t b, int64_t e) {
    std::this_thread::sleep_for(std::chrono::milliseconds(b == 0 ? 0 : 30));
    for (int64_t i = b; i < e; ++i) out[i] = 1;
  });
  EXPECT_EQ(out[0] + out[1], 2);
}

}  // namespace
}  // namespace waste::kernels
