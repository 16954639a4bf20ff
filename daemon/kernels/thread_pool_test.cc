#include "daemon/kernels/thread_pool.h"

#include <sched.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace waste::kernels {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

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

// Aborts the whole test binary if it is still alive after `limit`, so that a
// lost wake-up fails in seconds with a message instead of hanging until
// Bazel's test timeout.
class Watchdog {
 public:
  Watchdog(seconds limit, const char* what)
      : thread_([this, limit, what] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: %s did not finish in %llds (lost wake-up?)\n", what,
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // Last: starts after the fields it uses.
};

// Pins the calling thread, and so every thread it starts while this lives,
// to one CPU of its current mask; restores the mask at the end of scope.
class PinToOneCpu {
 public:
  PinToOneCpu() {
    CPU_ZERO(&saved_);
    if (sched_getaffinity(0, sizeof(saved_), &saved_) != 0) return;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &saved_)) continue;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pinned_ = sched_setaffinity(0, sizeof(one), &one) == 0;
      return;
    }
  }
  ~PinToOneCpu() {
    if (pinned_) sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  bool pinned() const { return pinned_; }

 private:
  cpu_set_t saved_;
  bool pinned_ = false;
};

// A gate workers can be held at (from the wake hook) until the test opens it.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.wait(lock, [this] { return open_; });
    --waiting_;
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Waits until `n` threads are held (or the watchdog fires).
  void AwaitHeld(int n) {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (waiting_ >= n) return;
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000, 4099}) {
      for (int64_t min_chunk : {1, 3, 100}) ExpectCoversOnce(pool, n, min_chunk);
    }
  }
}

TEST(ThreadPoolTest, HugeLoopStillCoversOnce) {
  // More chunks than state_ can count: the chunk size grows instead.
  ThreadPool pool(2);
  std::vector<std::atomic<uint8_t>> hits(1 << 20);
  pool.ParallelFor(static_cast<int64_t>(hits.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
  });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

TEST(ThreadPoolTest, ManyBackToBackLoops) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int iter = 0; iter < 20000; ++iter) {
    pool.ParallelFor(64, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  }
  EXPECT_EQ(total.load(), 20000 * 64);
}

// Many threads squeezed onto one core: most loops end before most workers
// are scheduled, so this is the late-worker path thousands of times.
TEST(ThreadPoolTest, ManyThreadsOnOneCoreCoverEveryIndexOnce) {
  PinToOneCpu pin;
  ASSERT_TRUE(pin.pinned());
  Watchdog watchdog(seconds(120), "ManyThreadsOnOneCoreCoverEveryIndexOnce");
  std::mt19937 rng(1);
  constexpr int64_t kMaxN = 3000;
  std::vector<std::atomic<int>> hits(kMaxN);
  for (int threads : {8, 16}) {
    ThreadPool pool(threads);
    for (int iter = 0; iter < 3000; ++iter) {
      const int64_t n = std::uniform_int_distribution<int64_t>(1, kMaxN)(rng);
      const int64_t min_chunk = std::uniform_int_distribution<int64_t>(1, 64)(rng);
      // Yielding inside some loops lets workers in mid-loop, so that claims
      // race on the one core too.
      const bool yield = iter % 4 == 0;
      pool.ParallelFor(
          n,
          [&](int64_t b, int64_t e) {
            if (yield) std::this_thread::yield();
            for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
          },
          min_chunk);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i].exchange(0, std::memory_order_relaxed), 1)
            << "threads=" << threads << " iter=" << iter << " n=" << n << " i=" << i;
      }
    }
  }
}

// Sleeps longer than the spin before every loop, so workers are asleep on the
// futex each time; the caller's first chunk waits until another thread has
// run a chunk, so a worker that misses its wake-up stalls the loop (and the
// watchdog fails the test) instead of going unnoticed.
TEST(ThreadPoolTest, WorkersWakeFromSleepEveryTime) {
  Watchdog watchdog(seconds(60), "WorkersWakeFromSleepEveryTime");
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    for (int iter = 0; iter < 100; ++iter) {
      std::this_thread::sleep_for(milliseconds(2));
      const std::thread::id caller = std::this_thread::get_id();
      std::atomic<bool> worker_ran{false};
      std::atomic<int64_t> total{0};
      pool.ParallelFor(64, [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() != caller) {
          worker_ran.store(true);
        } else {
          while (!worker_ran.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        total.fetch_add(e - b);
      });
      ASSERT_EQ(total.load(), 64);
    }
  }
}

// The caller runs out of chunks while a worker's chunk takes longer than the
// spin, so the caller sleeps on the futex and must be woken by that worker.
TEST(ThreadPoolTest, CallerWakesWhenSlowWorkerFinishes) {
  Watchdog watchdog(seconds(60), "CallerWakesWhenSlowWorkerFinishes");
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  for (int iter = 0; iter < 50; ++iter) {
    std::atomic<bool> worker_ran{false};
    std::atomic<int64_t> total{0};
    pool.ParallelFor(8, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() != caller) {
        if (!worker_ran.exchange(true)) std::this_thread::sleep_for(milliseconds(2));
      } else {
        while (!worker_ran.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      total.fetch_add(e - b);
    });
    ASSERT_EQ(total.load(), 8);
  }
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
    std::this_thread::sleep_for(milliseconds(20));
    inside.fetch_sub(1);
  });
  EXPECT_EQ(max_inside.load(), 2);
}

TEST(ThreadPoolTest, CallerWaitsForSlowWorker) {
  ThreadPool pool(2);
  std::vector<int> out(2, 0);
  pool.ParallelFor(2, [&](int64_t b, int64_t e) {
    std::this_thread::sleep_for(milliseconds(b == 0 ? 0 : 30));
    for (int64_t i = b; i < e; ++i) out[i] = 1;
  });
  EXPECT_EQ(out[0] + out[1], 2);
}

// Every worker is held back, as if descheduled, on waking to the first loop:
// loops must still finish, the caller doing every chunk, and the held workers
// must run nothing of the loops that ended while they were away.
TEST(ThreadPoolTest, CallerDoesNotWaitForWorkersThatClaimedNothing) {
  Watchdog watchdog(seconds(60), "CallerDoesNotWaitForWorkersThatClaimedNothing");
  constexpr int kThreads = 4;
  Gate gate;
  std::atomic<bool> held{true};
  ThreadPool pool(kThreads);
  pool.SetWorkerWakeHookForTesting([&] {
    if (held.load()) gate.Wait();
  });
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> chunks_off_caller{0};
  std::vector<std::atomic<int>> hits(256);
  auto run_loop = [&] {
    pool.ParallelFor(256, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() != caller) chunks_off_caller.fetch_add(1);
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.exchange(0), 1);
  };
  run_loop();
  gate.AwaitHeld(kThreads - 1);  // Every worker is now inside the hook.
  for (int iter = 0; iter < 2000; ++iter) run_loop();
  EXPECT_EQ(chunks_off_caller.load(), 0);

  // Released, the workers find every loop finished and take part again.
  held.store(false);
  gate.Open();
  for (int iter = 0; iter < 2000; ++iter) run_loop();
}

// A worker that wakes late (held in the wake hook for a random while) must
// never run a chunk of a loop that has returned: the loop's fn writes into a
// buffer on ParallelFor's caller's stack, which is dead by then (ASan with
// detect_stack_use_after_return catches a dangling call; the live_loop check
// catches it in any build).
std::atomic<int64_t> live_loop{-1};
std::atomic<int64_t> stale_calls{0};

void RunLoopOnStack(ThreadPool& pool, int64_t id, int64_t n) {
  std::array<int64_t, 512> buffer;
  buffer.fill(-1);
  live_loop.store(id);
  pool.ParallelFor(n, [&buffer, id](int64_t b, int64_t e) {
    if (live_loop.load() != id) stale_calls.fetch_add(1);
    for (int64_t i = b; i < e; ++i) buffer[i] = id;
  });
  live_loop.store(-1);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(buffer[i], id) << i;
}

TEST(ThreadPoolTest, LateWorkerNeverRunsAFinishedLoop) {
  Watchdog watchdog(seconds(120), "LateWorkerNeverRunsAFinishedLoop");
  stale_calls.store(0);
  ThreadPool pool(4);
  std::atomic<uint32_t> seed{1};
  pool.SetWorkerWakeHookForTesting([&] {
    // A cheap per-call pseudo-random delay of 0-63 us.
    const uint32_t x = seed.fetch_add(0x9E3779B9u) * 2654435761u;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(x >> 26);
    while (std::chrono::steady_clock::now() < until) {
    }
  });
  for (int64_t id = 0; id < 20000; ++id) {
    RunLoopOnStack(pool, id, 16 + id % 497);
    // Now and then a gap in which only a stale worker could call fn.
    if (id % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  EXPECT_EQ(stale_calls.load(), 0);
}

TEST(ThreadPoolTest, ShutdownWhileIdle) {
  Watchdog watchdog(seconds(30), "ShutdownWhileIdle");
  ThreadPool pool(4);
  std::this_thread::sleep_for(milliseconds(5));  // Workers asleep on the futex.
}

TEST(ThreadPoolTest, ShutdownRightAfterALoop) {
  Watchdog watchdog(seconds(30), "ShutdownRightAfterALoop");
  for (int iter = 0; iter < 200; ++iter) {
    ThreadPool pool(4);
    std::atomic<int64_t> total{0};
    pool.ParallelFor(1000, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    ASSERT_EQ(total.load(), 1000);
    // Destroyed with workers spinning (or still waking) for the next loop.
  }
}

TEST(ThreadPoolTest, ConstructAndDestroyInATightLoop) {
  Watchdog watchdog(seconds(60), "ConstructAndDestroyInATightLoop");
  for (int iter = 0; iter < 1000; ++iter) {
    ThreadPool pool(1 + iter % 6);
    if (iter % 2 == 0) {
      std::atomic<int64_t> total{0};
      pool.ParallelFor(100, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
      ASSERT_EQ(total.load(), 100);
    }
  }
}

// Loosely timed: 3 threads on one core, 10,000 tiny loops. A pool that waits
// for every worker pays a context switch to each (and its spinning) per loop
// when they share the core: the previous pool took 6.3 s here (630 us a
// loop). This one needs only the threads that got a chunk and takes a few
// milliseconds; the bound leaves a busy machine a factor of hundreds.
TEST(ThreadPoolTest, TinyLoopsOnOneCoreDoNotWaitForDescheduledWorkers) {
  PinToOneCpu pin;
  ASSERT_TRUE(pin.pinned());
  Watchdog watchdog(seconds(120), "TinyLoopsOnOneCoreDoNotWaitForDescheduledWorkers");
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  const auto start = std::chrono::steady_clock::now();
  for (int iter = 0; iter < 10000; ++iter) {
    pool.ParallelFor(64, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(total.load(), 10000 * 64);
  std::printf("10000 loops, 3 threads on one core: %.3f s (%.1f us/loop)\n", secs,
              secs * 1e6 / 10000);
  EXPECT_LT(secs, 2.0);
}

}  // namespace
}  // namespace waste::kernels
