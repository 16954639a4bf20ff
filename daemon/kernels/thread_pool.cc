#include "daemon/kernels/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "storage/logging.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace waste::kernels {
namespace {

// How long an idle thread spins before sleeping. Long enough to bridge the
// gap between two matvecs of one decode step (norms, rope: a few us), short
// enough that an idle daemon sleeps almost at once.
constexpr auto kSpinTime = std::chrono::microseconds(200);

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Spins until pred() holds or kSpinTime passes; returns pred().
template <typename Pred>
bool SpinUntil(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() > deadline) return pred();
  }
}

}  // namespace

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
  WCHECK(!in_parallel_for_.exchange(true)) << "ParallelFor called concurrently or reentrantly";
  const int64_t target_chunks = 4 * static_cast<int64_t>(num_threads());
  fn_ = &fn;
  n_ = n;
  chunk_ = std::max(min_chunk, (n + target_chunks - 1) / target_chunks);
  next_chunk_.store(0, std::memory_order_relaxed);
  busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  // seq_cst on both sides (here and in WorkerLoop) makes the pair
  // "publish generation / read sleepers" against "register sleeper / read
  // generation" safe: either we see the sleeper or it sees the new loop.
  generation_.fetch_add(1);
  if (sleeping_workers_.load() > 0) generation_.notify_all();

  RunChunks();

  if (!SpinUntil([this] { return busy_workers_.load(std::memory_order_acquire) == 0; })) {
    caller_sleeping_.store(true);
    while (true) {
      const int busy = busy_workers_.load();
      if (busy == 0) break;
      busy_workers_.wait(busy);
    }
    caller_sleeping_.store(false);
  }
  fn_ = nullptr;
  in_parallel_for_.store(false, std::memory_order_release);
}

void ThreadPool::RunChunks() {
  const int64_t num_chunks = (n_ + chunk_ - 1) / chunk_;
  while (true) {
    const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= num_chunks) return;
    const int64_t begin = c * chunk_;
    (*fn_)(begin, std::min(n_, begin + chunk_));
  }
}

void ThreadPool::WorkerLoop() {
  // Starts at the constructor's value, not at a fresh load: a loop published
  // before this thread got here must still be run (the caller waits for it).
  // Every worker runs every loop, so the next one is always seen + 1.
  uint32_t seen = 0;
  while (true) {
    if (!SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      sleeping_workers_.fetch_add(1);
      generation_.wait(seen);
      sleeping_workers_.fetch_sub(1);
    }
    ++seen;
    if (stop_.load()) return;
    RunChunks();
    if (busy_workers_.fetch_sub(1) == 1 && caller_sleeping_.load()) busy_workers_.notify_all();
  }
}

}  // namespace waste::kernels
