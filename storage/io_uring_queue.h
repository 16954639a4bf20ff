// A ReadQueue on io_uring (liburing) over a posix file: up to `depth` reads
// in flight in the kernel, the rest queued here. Short reads are resubmitted
// for the remainder; EIO, EINTR and EAGAIN are retried per the file's
// RetryPolicy (the backoff sleeps inside Wait, which is fine for errors this
// rare). The requests of one chain (ReadRequest::chain) go into the ring
// linked (IOSQE_IO_HARDLINK: the kernel starts each when the one before it
// finishes, whatever its result), as far as one submission of the ring
// reaches. On an O_DIRECT file, unaligned requests are read through an aligned
// bounce buffer and copied out on completion.
//
// Ownership: borrows the file (which must outlive the queue) and the
// callers' buffers until their completions are returned by Wait.
// Thread safety: one thread at a time (the ReadQueue contract).
#ifndef WASTE_STORAGE_IO_URING_QUEUE_H_
#define WASTE_STORAGE_IO_URING_QUEUE_H_

#include <liburing.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/aligned_buffer.h"
#include "storage/env.h"
#include "storage/posix_env.h"

namespace waste::storage {

// True when this process may create an io_uring instance (probed once).
bool IoUringAvailable();

class IoUringReadQueue final : public ReadQueue {
 public:
  // UNAVAILABLE when the kernel refuses io_uring (old kernel, seccomp,
  // io_uring_disabled sysctl).
  static absl::StatusOr<std::unique_ptr<ReadQueue>> Create(const PosixRandomAccessFile* file,
                                                           int depth);
  // Waits for the reads in flight in the kernel (their buffers must still be
  // valid); queued ones are dropped.
  ~IoUringReadQueue() override;

  absl::Status Submit(std::span<const ReadRequest> requests) override;
  absl::StatusOr<size_t> Wait(size_t min_completions, std::vector<ReadCompletion>* out) override;
  size_t Outstanding() const override { return outstanding_; }
  IoEngine Engine() const override { return IoEngine::kIoUring; }

  // Tests only: `hook(tag, result)` replaces each completion's result (bytes
  // read, or -errno) before the queue acts on it, to reach the retry and
  // short-read paths that a healthy disk never takes. A smaller byte count
  // is safe: the rest is read again.
  void SetResultHookForTesting(std::function<int(uint64_t tag, int result)> hook) {
    result_hook_ = std::move(hook);
  }

 private:
  // One caller request while it is queued or in flight.
  struct Op {
    ReadRequest request;
    uint64_t device_offset = 0;  // Where the kernel reads (aligned when bouncing).
    size_t device_length = 0;    // How much it asks for.
    size_t need = 0;             // Bytes from device_offset that must arrive.
    size_t done = 0;             // Bytes arrived so far.
    size_t furthest = 0;         // The most `done` has been (O_DIRECT re-reads a block).
    int attempts = 0;            // Failed attempts (transient errors).
    bool link_next = false;      // The next queued op starts after this one.
    AlignedBuffer bounce;        // Empty unless the request is unaligned on O_DIRECT.
    char* target() const { return bounce.data() != nullptr ? bounce.data() : request.buffer; }
  };

  IoUringReadQueue(const PosixRandomAccessFile* file, int depth);

  // Moves queued ops into the ring until `depth_` are in flight.
  absl::Status SubmitPending();
  // Handles one completion: finishes, requeues or fails its op.
  void Complete(Op* op, int result);
  void Finish(Op* op, absl::Status status);

  const PosixRandomAccessFile* const file_;
  const int depth_;
  io_uring ring_;
  bool ring_ready_ = false;
  bool can_link_ = false;  // The kernel chains reads (IOSQE_IO_HARDLINK, 5.5+).
  std::deque<std::unique_ptr<Op>> pending_;
  size_t in_flight_ = 0;
  size_t outstanding_ = 0;
  std::vector<ReadCompletion> done_;
  std::function<int(uint64_t, int)> result_hook_;
};

}  // namespace waste::storage

#endif  // WASTE_STORAGE_IO_URING_QUEUE_H_
