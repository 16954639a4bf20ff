#include "storage/thread_pool_queue.h"

#include <algorithm>
#include <utility>

namespace waste::storage {

ThreadPoolReadQueue::ThreadPoolReadQueue(const RandomAccessFile* file, int threads, int depth)
    : file_(file) {
  const int workers = std::max(1, std::min(threads, depth));
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPoolReadQueue::~ThreadPoolReadQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    pending_.clear();
  }
  for (std::thread& worker : workers_) worker.join();
}

absl::Status ThreadPoolReadQueue::Submit(std::span<const ReadRequest> requests) {
  absl::MutexLock lock(&mu_);
  pending_.insert(pending_.end(), requests.begin(), requests.end());
  outstanding_ += requests.size();
  return absl::OkStatus();
}

absl::StatusOr<size_t> ThreadPoolReadQueue::Wait(size_t min_completions,
                                                 std::vector<ReadCompletion>* out) {
  absl::MutexLock lock(&mu_);
  const size_t want = std::min(min_completions, outstanding_);
  auto enough = [this, want]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_.size() >= want; };
  mu_.Await(absl::Condition(&enough));
  const size_t n = done_.size();
  std::move(done_.begin(), done_.end(), std::back_inserter(*out));
  done_.clear();
  outstanding_ -= n;
  return n;
}

size_t ThreadPoolReadQueue::Outstanding() const {
  absl::MutexLock lock(&mu_);
  return outstanding_;
}

void ThreadPoolReadQueue::WorkerLoop() {
  auto has_work = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !pending_.empty(); };
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(&has_work));
    if (stopping_) return;
    const ReadRequest request = pending_.front();
    pending_.pop_front();
    mu_.Unlock();
    absl::Status status = file_->Read(request.offset, request.length, request.buffer);
    mu_.Lock();
    done_.push_back({request.tag, std::move(status)});
  }
}

absl::Status SyncReadQueue::Submit(std::span<const ReadRequest> requests) {
  for (const ReadRequest& request : requests) {
    done_.push_back({request.tag, file_->Read(request.offset, request.length, request.buffer)});
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> SyncReadQueue::Wait(size_t /*min_completions*/,
                                           std::vector<ReadCompletion>* out) {
  // Everything submitted is already done, so "at least min" is all of it.
  const size_t n = done_.size();
  std::move(done_.begin(), done_.end(), std::back_inserter(*out));
  done_.clear();
  return n;
}

}  // namespace waste::storage
