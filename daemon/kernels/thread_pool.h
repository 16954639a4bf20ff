// A fixed set of persistent worker threads for data-parallel kernels.
//
// Decode runs hundreds of small parallel loops per token (one per weight
// matrix), each 10-500 us long, so the cost that matters is waking workers:
// they spin for a short while after each loop (a new loop usually follows
// within microseconds) and then sleep on a futex, so an idle daemon burns no
// CPU. The calling thread takes a share of the work instead of waiting.
//
// Thread-safety: ParallelFor may be called from one thread at a time (it is
// CHECKed); the pool itself is the only owner of its workers.
#ifndef WASTE_DAEMON_KERNELS_THREAD_POOL_H_
#define WASTE_DAEMON_KERNELS_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace waste::kernels {

class ThreadPool {
 public:
  // `num_threads` counts the caller: ThreadPool(2) starts one worker.
  // Values < 1 are treated as 1 (no workers; ParallelFor runs inline).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges that together cover [0, n), each
  // range at least `min_chunk` long (except the last), on the workers and the
  // calling thread; returns when all calls have returned. Ranges are handed
  // out dynamically in about 4 per thread so a thread that is descheduled
  // does not hold up the rest. fn must not call ParallelFor on this pool.
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn, int64_t min_chunk = 1);

 private:
  void WorkerLoop();
  // Claims and runs chunks of the current loop until none are left.
  void RunChunks();

  std::vector<std::thread> workers_;

  // The current loop, published by bumping generation_.
  const absl::FunctionRef<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_chunk_{0};

  std::atomic<uint32_t> generation_{0};
  std::atomic<int> sleeping_workers_{0};  // Workers blocked in generation_.wait.
  std::atomic<int> busy_workers_{0};      // Workers still inside the current loop.
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> in_parallel_for_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_THREAD_POOL_H_
