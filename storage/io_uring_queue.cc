#include "storage/io_uring_queue.h"

#include <errno.h>
#include <string.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace waste::storage {
namespace {

// io_uring's read length is 32 bits; larger requests complete as a series of
// short reads, which the queue already handles.
constexpr size_t kMaxSqeLength = size_t{1} << 30;

std::string ReadContext(const RandomAccessFile& file, const ReadRequest& request) {
  return absl::StrFormat("read of %s at offset %d length %d", file.Path(), request.offset,
                         request.length);
}

}  // namespace

bool IoUringAvailable() {
  static const bool available = [] {
    io_uring ring;
    int rc = io_uring_queue_init(2, &ring, 0);
    if (rc < 0) {
      WLOG(INFO) << "io_uring is unavailable here (" << strerror(-rc) << ")";
      return false;
    }
    io_uring_queue_exit(&ring);
    return true;
  }();
  return available;
}

IoEngine ResolveAutoEngine() {
  static const IoEngine engine = [] {
    IoEngine resolved = IoUringAvailable() ? IoEngine::kIoUring : IoEngine::kThreads;
    WLOG(INFO) << "read engine: " << IoEngineName(resolved) << " (auto-detected)";
    return resolved;
  }();
  return engine;
}

IoUringReadQueue::IoUringReadQueue(const PosixRandomAccessFile* file, int depth)
    : file_(file), depth_(depth) {}

absl::StatusOr<std::unique_ptr<ReadQueue>> IoUringReadQueue::Create(
    const PosixRandomAccessFile* file, int depth) {
  std::unique_ptr<IoUringReadQueue> queue(new IoUringReadQueue(file, depth));
  int rc = io_uring_queue_init(static_cast<unsigned>(depth), &queue->ring_, 0);
  if (rc < 0) {
    return absl::UnavailableError(
        absl::StrFormat("io_uring_queue_init(%d) failed: %s (errno %d); use the threads engine",
                        depth, strerror(-rc), -rc));
  }
  queue->ring_ready_ = true;
  // Hard links came with 5.5, as did IORING_FEAT_NODROP.
  queue->can_link_ = (queue->ring_.features & IORING_FEAT_NODROP) != 0;
  return std::unique_ptr<ReadQueue>(std::move(queue));
}

IoUringReadQueue::~IoUringReadQueue() {
  if (!ring_ready_) return;
  // The kernel still writes into the buffers of reads in flight; wait for
  // them before the ops (and their bounce buffers) go away.
  while (in_flight_ > 0) {
    io_uring_cqe* cqe = nullptr;
    int rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) break;
    delete static_cast<Op*>(io_uring_cqe_get_data(cqe));
    io_uring_cqe_seen(&ring_, cqe);
    --in_flight_;
  }
  io_uring_queue_exit(&ring_);
}

absl::Status IoUringReadQueue::Submit(std::span<const ReadRequest> requests) {
  const uint64_t size = file_->Size();
  const bool direct = file_->Direct();
  // Ops of one chain must be neighbours in the ring: this call's ops go to
  // the backlog unchained first, then chain by chain.
  const size_t first_new = pending_.size();
  for (const ReadRequest& request : requests) {
    ++outstanding_;
    if (request.offset > size || request.length > size - request.offset) {
      done_.push_back({request.tag, absl::OutOfRangeError(
                                        absl::StrFormat("%s is past the end of the file (size %d)",
                                                        ReadContext(*file_, request), size))});
      continue;
    }
    if (request.length == 0) {
      done_.push_back({request.tag, absl::OkStatus()});
      continue;
    }
    auto op = std::make_unique<Op>();
    op->request = request;
    op->device_offset = request.offset;
    op->device_length = request.length;
    op->need = request.length;
    if (direct && !(IsAligned(request.offset, kDirectIoAlignment) &&
                    IsAligned(request.length, kDirectIoAlignment) &&
                    IsAligned(request.buffer, kDirectIoAlignment))) {
      op->device_offset = AlignDown(request.offset, kDirectIoAlignment);
      op->device_length =
          AlignUp(request.offset + request.length, kDirectIoAlignment) - op->device_offset;
      op->need = request.offset + request.length - op->device_offset;
      op->bounce = AlignedBuffer(op->device_length);
      if (op->bounce.data() == nullptr) {
        done_.push_back(
            {request.tag, absl::ResourceExhaustedError("no memory for the bounce buffer of " +
                                                       ReadContext(*file_, request))});
        continue;
      }
      if (auto* counters = file_->counters()) {
        counters->bounce_reads.fetch_add(1, std::memory_order_relaxed);
      }
    }
    pending_.push_back(std::move(op));
  }
  const auto first = pending_.begin() + static_cast<ptrdiff_t>(first_new);
  std::stable_sort(first, pending_.end(), [](const auto& a, const auto& b) {
    return a->request.chain < b->request.chain;
  });
  for (auto op = first; can_link_ && op != pending_.end() && op + 1 != pending_.end(); ++op) {
    (*op)->link_next = (*op)->request.chain != 0 && (*op)->request.chain == op[1]->request.chain;
  }
  return SubmitPending();
}

absl::Status IoUringReadQueue::SubmitPending() {
  io_uring_sqe* last = nullptr;  // The previous SQE of this submission.
  while (in_flight_ < static_cast<size_t>(depth_) && !pending_.empty()) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) break;  // Ring full; the rest go after completions.
    Op* op = pending_.front().release();
    pending_.pop_front();
    // An O_DIRECT continuation must start on a block boundary; re-reading a
    // partial block is cheaper than bouncing it.
    if (file_->Direct()) op->done = AlignDown(op->done, kDirectIoAlignment);
    const size_t length = std::min(op->device_length - op->done, kMaxSqeLength);
    io_uring_prep_read(sqe, file_->fd(), op->target() + op->done, static_cast<unsigned>(length),
                       op->device_offset + op->done);
    io_uring_sqe_set_data(sqe, op);
    if (op->link_next) sqe->flags |= IOSQE_IO_HARDLINK;
    op->link_next = false;  // A short read's remainder goes on its own.
    ++in_flight_;
    last = sqe;
  }
  if (last == nullptr) return absl::OkStatus();
  // A chain ends with the submission: what follows goes in with later ones.
  last->flags &= ~IOSQE_IO_HARDLINK;
  int rc;
  do {
    rc = io_uring_submit(&ring_);
  } while (rc == -EINTR);
  if (rc < 0) {
    return absl::InternalError(absl::StrFormat("io_uring_submit for %s failed: %s (errno %d)",
                                               file_->Path(), strerror(-rc), -rc));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> IoUringReadQueue::Wait(size_t min_completions,
                                              std::vector<ReadCompletion>* out) {
  const size_t want = std::min(min_completions, outstanding_);
  while (true) {
    if (absl::Status status = SubmitPending(); !status.ok()) return status;
    // Reap everything that is ready, not just one, to keep syscalls down;
    // with want == 0 this is all Wait does (a poll that also refills the
    // ring from the backlog).
    unsigned head;
    unsigned seen = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      --in_flight_;
      Op* op = static_cast<Op*>(io_uring_cqe_get_data(cqe));
      Complete(op, result_hook_ ? result_hook_(op->request.tag, cqe->res) : cqe->res);
      ++seen;
    }
    io_uring_cq_advance(&ring_, seen);
    if (done_.size() >= want) break;
    if (seen > 0) continue;  // Retries may have gone back to the backlog.
    int rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) {
      return absl::InternalError(absl::StrFormat("io_uring_wait_cqe for %s failed: %s (errno %d)",
                                                 file_->Path(), strerror(-rc), -rc));
    }
  }
  if (absl::Status status = SubmitPending(); !status.ok()) return status;
  const size_t n = done_.size();
  std::move(done_.begin(), done_.end(), std::back_inserter(*out));
  done_.clear();
  outstanding_ -= n;
  return n;
}

void IoUringReadQueue::Complete(Op* raw_op, int result) {
  std::unique_ptr<Op> op(raw_op);
  const RetryPolicy& retry = file_->retry_policy();
  if (result < 0) {
    const int error = -result;
    ++op->attempts;
    const bool transient = error == EIO || error == EINTR || error == EAGAIN;
    if (transient && op->attempts < retry.max_attempts) {
      if (auto* counters = file_->counters()) {
        counters->retries.fetch_add(1, std::memory_order_relaxed);
      }
      absl::SleepFor(RetryBackoff(retry, op->attempts));
      pending_.push_front(std::move(op));
      return;
    }
    absl::Status status = PosixError(error, ReadContext(*file_, op->request));
    if (transient) {
      status = absl::Status(status.code(), absl::StrFormat("%s (gave up after %d attempts)",
                                                           status.message(), op->attempts));
    }
    Finish(op.get(), std::move(status));
    return;
  }
  // The size was checked at Submit, so EOF here means the file shrank: a
  // read of nothing, or (O_DIRECT, which resumes at the start of the
  // partial block) one that ends no further than the last did.
  if ((result == 0 || op->done + static_cast<size_t>(result) <= op->furthest) &&
      op->done < op->need) {
    Finish(op.get(), absl::DataLossError(absl::StrFormat(
                         "%s: unexpected end of file after %d bytes (the file shrank from %d?)",
                         ReadContext(*file_, op->request), op->furthest, file_->Size())));
    return;
  }
  op->done += static_cast<size_t>(result);
  op->furthest = op->done;
  if (op->done < op->need) {
    pending_.push_front(std::move(op));  // Short read: ask for the rest.
    return;
  }
  Finish(op.get(), absl::OkStatus());
}

void IoUringReadQueue::Finish(Op* op, absl::Status status) {
  if (status.ok() && op->bounce.data() != nullptr) {
    std::memcpy(op->request.buffer, op->bounce.data() + (op->request.offset - op->device_offset),
                op->request.length);
  }
  done_.push_back({op->request.tag, std::move(status)});
}

}  // namespace waste::storage
