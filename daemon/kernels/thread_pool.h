// A fixed set of persistent worker threads for data-parallel kernels.
//
// Decode runs hundreds of small parallel loops per token (one per weight
// matrix), each 10-500 us long, so the cost that matters is waking workers:
// they spin for a short while after each loop (a new loop usually follows
// within microseconds) and then sleep on a futex, so an idle daemon burns no
// CPU. Past the first few microseconds the spin yields the core each round,
// so a spinning thread that shares a core with one that has work hands it
// over. The calling thread takes a share of the work instead of waiting.
//
// A loop ends when its chunks are done, not when every worker has checked in:
// workers claim chunks one at a time, and the caller waits only for chunks
// that another thread claimed and is still running. A worker that is
// descheduled (more threads than free cores, a CPU hog beside us) simply
// misses the loop, and the caller and the other workers take its share. On a
// machine where every thread has its own core this is the same as before; on
// a crowded one it is the difference between losing one thread's share and
// waiting a scheduler time slice per loop.
//
// Thread-safety: ParallelFor may be called from one thread at a time (it is
// CHECKed); the pool itself is the only owner of its workers.
#ifndef WASTE_DAEMON_KERNELS_THREAD_POOL_H_
#define WASTE_DAEMON_KERNELS_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
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

  // The pool size to use when none is configured: the physical cores this
  // process may run on (PhysicalCores in cpu_features.h), not the logical
  // CPUs, since an SMT sibling adds little to matvec and a thread that has
  // to share a core is the one that gets descheduled.
  static int DefaultThreads();

  // Calls fn(begin, end) on disjoint ranges that together cover [0, n), each
  // range at least `min_chunk` long (except the last), on the workers and the
  // calling thread; returns when all calls have returned, and no call of fn
  // starts after that. Ranges are handed out dynamically, about 4 per thread,
  // so a thread that is descheduled does not hold up the rest; which thread
  // runs which range is unspecified (the caller may run all of them). fn must
  // not call ParallelFor on this pool.
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn, int64_t min_chunk = 1);

  // Testing seam: each worker calls `hook` every time it wakes to a new loop,
  // before it claims anything, so a test can hold a worker back (as a
  // descheduled thread would be). Set it before the first ParallelFor.
  void SetWorkerWakeHookForTesting(std::function<void()> hook) { wake_hook_ = std::move(hook); }

 private:
  // state_ packs the live loop and its next chunk, so that claiming a chunk is
  // one CAS that fails for anyone holding a stale view of the pool: a worker
  // that read state_ during loop g and resumes after g ended finds the
  // generation (or next) changed, and a finished loop has next == total, so
  // there is nothing to claim. When a CAS does succeed, the value it replaced
  // is the live loop's, so the chunk is a real chunk of the loop running now
  // (which is also why the generation may wrap). Only after a successful
  // claim does a thread read fn_, n_ and chunk_, and the loop cannot end
  // (ParallelFor cannot return, fn cannot dangle) until that chunk is counted
  // in completed_.
  //   bits 63..32: generation (the loop's number)
  //   bits 31..16: total chunks of the loop
  //   bits 15..0:  next chunk to hand out
  static constexpr int kGenerationShift = 32;
  static constexpr int kTotalShift = 16;
  static constexpr uint64_t kChunkMask = 0xFFFF;
  static constexpr int64_t kMaxChunks = 0xFFFF;

  void WorkerLoop();
  // Claims and runs chunks of whatever loop is live until none are left;
  // returns how many it ran, all of one loop, and sets *total to that loop's
  // chunk count (if it ran any). The caller of RunChunks must then add them
  // to completed_.
  int64_t RunChunks(uint32_t* total);

  std::vector<std::thread> workers_;
  std::function<void()> wake_hook_;

  // The live loop; written by the caller only while no chunk is claimed.
  const absl::FunctionRef<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<bool> in_parallel_for_{false};

  // The padding keeps the fields each thread hammers on cache lines of their
  // own, without over-aligning the class (alignas(64) breaks where the
  // allocator cannot align, e.g. ASan's fake stack frames).
  [[maybe_unused]] char pad0_[64];
  // Written per chunk claimed and per chunk done.
  std::atomic<uint64_t> state_{0};
  [[maybe_unused]] char pad1_[64];
  std::atomic<uint32_t> completed_{0};  // Chunks of the live loop done.
  std::atomic<bool> caller_sleeping_{false};
  [[maybe_unused]] char pad2_[64];

  // Read by spinning workers; written once per loop.
  std::atomic<uint32_t> generation_{0};   // Bumped per loop and at shutdown.
  std::atomic<int> sleeping_workers_{0};  // Workers blocked in generation_.wait.
  std::atomic<bool> stop_{false};
};

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_THREAD_POOL_H_
