// ReadQueues that work over any RandomAccessFile, so every Env (posix,
// MemEnv, FaultEnv) can offer batches:
//  - ThreadPoolReadQueue: worker threads calling RandomAccessFile::Read (the
//    posix Env's fallback when io_uring is unavailable);
//  - SyncReadQueue: each read runs inside Submit (tests, debugging).
// Retries, bounce buffers and error messages are the file's: every read goes
// through RandomAccessFile::Read.
//
// Ownership: the queue borrows `file`, which must outlive it, and the
// callers' buffers until their completions are returned by Wait.
// Thread safety: one thread at a time calls Submit/Wait/Outstanding (the
// ReadQueue contract); the workers are internal.
#ifndef WASTE_STORAGE_THREAD_POOL_QUEUE_H_
#define WASTE_STORAGE_THREAD_POOL_QUEUE_H_

#include <cstddef>
#include <deque>
#include <span>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/env.h"

namespace waste::storage {

class ThreadPoolReadQueue final : public ReadQueue {
 public:
  // Starts min(threads, depth) workers (at least one), so that at most
  // `depth` reads run at once; further reads wait in the queue.
  ThreadPoolReadQueue(const RandomAccessFile* file, int threads, int depth);
  // Reads already running finish (their buffers must still be valid);
  // queued ones are dropped.
  ~ThreadPoolReadQueue() override;

  absl::Status Submit(std::span<const ReadRequest> requests) override;
  absl::StatusOr<size_t> Wait(size_t min_completions, std::vector<ReadCompletion>* out) override;
  size_t Outstanding() const override;
  IoEngine Engine() const override { return IoEngine::kThreads; }

 private:
  void WorkerLoop();

  const RandomAccessFile* const file_;
  mutable absl::Mutex mu_;
  std::deque<ReadRequest> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<ReadCompletion> done_ ABSL_GUARDED_BY(mu_);
  size_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

class SyncReadQueue final : public ReadQueue {
 public:
  explicit SyncReadQueue(const RandomAccessFile* file) : file_(file) {}

  absl::Status Submit(std::span<const ReadRequest> requests) override;
  absl::StatusOr<size_t> Wait(size_t min_completions, std::vector<ReadCompletion>* out) override;
  size_t Outstanding() const override { return done_.size(); }
  IoEngine Engine() const override { return IoEngine::kSync; }

 private:
  const RandomAccessFile* const file_;
  std::vector<ReadCompletion> done_;
};

}  // namespace waste::storage

#endif  // WASTE_STORAGE_THREAD_POOL_QUEUE_H_
