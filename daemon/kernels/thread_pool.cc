#include "daemon/kernels/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "daemon/kernels/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace waste::kernels {
namespace {

using Clock = std::chrono::steady_clock;

// How long an idle thread spins before sleeping. Long enough to bridge the
// gap between two matvecs of one decode step (norms, rope: a few us), short
// enough that an idle daemon sleeps almost at once.
constexpr auto kSpinTime = std::chrono::microseconds(200);

// For this long a spinning thread only pauses; after that it also yields
// every round. When this thread has a core to itself, sched_yield returns at
// once (a fraction of a microsecond) and changes nothing; when it shares one
// with a thread that has work (a worker holding a chunk, the caller, another
// process) it hands the core over instead of burning the rest of the time
// slice.
constexpr auto kPureSpinTime = std::chrono::microseconds(5);

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Spins until pred() holds or kSpinTime passes; returns pred().
template <typename Pred>
bool SpinUntil(Pred pred) {
  const Clock::time_point start = Clock::now();
  while (true) {
    for (int i = 0; i < 32; ++i) {
      if (pred()) return true;
      CpuRelax();
    }
    const Clock::duration spun = Clock::now() - start;
    if (spun > kSpinTime) return pred();
    if (spun > kPureSpinTime) sched_yield();
  }
}

}  // namespace

int ThreadPool::DefaultThreads() { return PhysicalCores(); }

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn,
                             int64_t min_chunk) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  if (workers_.empty() || n <= min_chunk) {
    fn(0, n);
    return;
  }
  const int64_t target_chunks = 4 * static_cast<int64_t>(num_threads());
  int64_t chunk = std::max(min_chunk, (n + target_chunks - 1) / target_chunks);
  chunk = std::max(chunk, (n + kMaxChunks - 1) / kMaxChunks);  // The count must fit in state_.
  const int64_t total = (n + chunk - 1) / chunk;
  if (total == 1) {
    fn(0, n);
    return;
  }
  WCHECK(!in_parallel_for_.exchange(true, std::memory_order_acquire))
      << "ParallelFor called concurrently or reentrantly";

  // No chunk of the previous loop is claimed or running (we waited for all of
  // them), so nobody reads these until the release below publishes them.
  fn_ = &fn;
  n_ = n;
  chunk_ = chunk;
  completed_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  const uint64_t state = static_cast<uint64_t>(generation) << kGenerationShift |
                         static_cast<uint64_t>(total) << kTotalShift;
  state_.store(state, std::memory_order_release);
  // seq_cst on both sides (here and in WorkerLoop) makes the pair
  // "publish generation / read sleepers" against "register sleeper / read
  // generation" safe: either we see the sleeper or it sees the new loop.
  generation_.store(generation);
  if (sleeping_workers_.load() > 0) generation_.notify_all();

  const uint32_t want = static_cast<uint32_t>(total);
  uint32_t unused_total;
  const int64_t mine = RunChunks(&unused_total);
  // Every chunk is claimed now; wait only for those still running elsewhere.
  if (completed_.fetch_add(static_cast<uint32_t>(mine)) + mine != want &&
      !SpinUntil([&] { return completed_.load(std::memory_order_acquire) == want; })) {
    // The same seq_cst pairing as for the workers' sleep: either we see the
    // last chunk counted or its worker sees caller_sleeping_ and wakes us.
    caller_sleeping_.store(true);
    for (uint32_t done; (done = completed_.load()) != want;) completed_.wait(done);
    caller_sleeping_.store(false, std::memory_order_relaxed);
  }
  fn_ = nullptr;
  in_parallel_for_.store(false, std::memory_order_release);
}

int64_t ThreadPool::RunChunks(uint32_t* total) {
  int64_t ran = 0;
  uint64_t state = state_.load(std::memory_order_acquire);
  while (true) {
    const uint64_t next = state & kChunkMask;
    const uint64_t chunks = (state >> kTotalShift) & kChunkMask;
    if (next >= chunks) return ran;
    // Acquire on success pairs with ParallelFor's release of fn_, n_, chunk_.
    if (!state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire,
                                      std::memory_order_acquire)) {
      continue;  // `state` now holds the current value; look again.
    }
    const int64_t begin = static_cast<int64_t>(next) * chunk_;
    (*fn_)(begin, std::min(n_, begin + chunk_));
    ++ran;
    *total = static_cast<uint32_t>(chunks);
    // Our chunk is not counted in completed_ yet, so the loop cannot have
    // ended: the next claim, if any, is from the same loop.
    state = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  while (true) {
    if (!SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      sleeping_workers_.fetch_add(1);
      generation_.wait(seen);
      sleeping_workers_.fetch_sub(1);
    }
    // Straight to the newest loop: loops that ended while this thread was
    // descheduled or asleep are nothing to it.
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    if (wake_hook_) wake_hook_();
    uint32_t total = 0;
    const int64_t ran = RunChunks(&total);
    if (ran == 0) continue;
    // Once counted, our chunks no longer hold the loop open: from here on
    // nothing of it (fn_, n_, chunk_) may be touched. The notify is harmless
    // if the caller has moved on.
    if (completed_.fetch_add(static_cast<uint32_t>(ran)) + ran == total &&
        caller_sleeping_.load()) {
      completed_.notify_one();
    }
  }
}

}  // namespace waste::kernels
