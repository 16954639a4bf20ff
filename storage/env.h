// storage::Env: the seam every byte of model data passes through (after
// leveldb's include/leveldb/env.h).
//
// Implementations: the posix Env (pread, O_DIRECT where the filesystem
// allows it, io_uring or a pread thread pool for batches), MemEnv (files in
// memory, for tests) and FaultEnv (wraps another Env and injects EIO, short
// reads, latency and corrupted bytes, for tests).
//
// Thread safety: Env and RandomAccessFile are safe to use from many threads
// at once. A ReadQueue is used by one thread at a time.
#ifndef WASTE_STORAGE_ENV_H_
#define WASTE_STORAGE_ENV_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace waste::storage {

// How a file is opened for reading.
struct ReadOptions {
  // Bypass the page cache with O_DIRECT when the filesystem allows it. If it
  // does not, the file is opened buffered and RandomAccessFile::direct()
  // says so (the posix Env also logs it once).
  bool direct = false;
};

// Bounded retries of transient read errors (EIO, EINTR, EAGAIN, short reads).
struct RetryPolicy {
  int max_attempts = 4;  // Including the first.
  absl::Duration initial_backoff = absl::Milliseconds(1);
  double backoff_multiplier = 4.0;
};

// A file read at arbitrary offsets.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;

  // Reads exactly `n` bytes at `offset` into `buffer`, retrying transient
  // errors per the Env's RetryPolicy. Reading past the end of the file is
  // OUT_OF_RANGE. A read that keeps failing is an error whose message names
  // the file, offset, length and errno. When direct() is true, offset, n and
  // buffer need not be aligned: the implementation bounces unaligned reads
  // through an aligned buffer (aligned reads go straight to `buffer`).
  virtual absl::Status Read(uint64_t offset, size_t n, char* buffer) const = 0;

  // The file's size in bytes, as of opening.
  virtual uint64_t Size() const = 0;

  // The path the file was opened with (for messages).
  virtual const std::string& Path() const = 0;

  // True when reads bypass the page cache (O_DIRECT).
  virtual bool Direct() const = 0;

  // Offset, length and buffer alignment that lets a read go straight to the
  // device without a bounce buffer (4096 for O_DIRECT files, 1 otherwise).
  virtual size_t Alignment() const = 0;
};

// One read of an asynchronous batch. The buffer belongs to the caller and
// must stay valid until the read's completion is returned.
struct ReadRequest {
  uint64_t offset = 0;
  size_t length = 0;
  char* buffer = nullptr;
  uint64_t tag = 0;  // Returned with the completion.
  // 0: read alongside the others. Requests of one Submit with the same
  // nonzero chain run one after another, in the order given, so that of a
  // batch needed in order the first requests land first instead of all
  // sharing the disk until the last one lands; different chains run side by
  // side. A hint: the io_uring engine links each chain in the kernel; the
  // others start requests in order but run several at once.
  uint16_t chain = 0;
};

struct ReadCompletion {
  uint64_t tag = 0;
  absl::Status status;  // OK when all `length` bytes were read.
};

// Which engine serves a ReadQueue.
enum class IoEngine {
  kAuto,     // io_uring when the kernel allows it, else the thread pool.
  kIoUring,  // liburing; fails to create when unavailable.
  kThreads,  // A pool of threads calling pread.
  kSync,     // Reads run inside Submit, one at a time (tests, debugging).
};

struct ReadQueueOptions {
  IoEngine engine = IoEngine::kAuto;
  int depth = 8;    // Reads in flight at most; more wait inside the queue.
  int threads = 4;  // For kThreads.
};

// Asynchronous batch reads of one file into caller-provided buffers.
class ReadQueue {
 public:
  virtual ~ReadQueue() = default;

  // Queues reads. Returns an error only when the queue itself is broken;
  // errors of individual reads come back in their completions.
  virtual absl::Status Submit(std::span<const ReadRequest> requests) = 0;

  // Appends at least `min_completions` (at most all outstanding) finished
  // reads to `out`, blocking until they are there. Returns how many were
  // appended. Wait(0, out) collects what has finished without blocking.
  virtual absl::StatusOr<size_t> Wait(size_t min_completions, std::vector<ReadCompletion>* out) = 0;

  // Reads submitted and not yet returned by Wait.
  virtual size_t Outstanding() const = 0;

  // The engine actually used (kAuto resolved), for logs and stats.
  virtual IoEngine Engine() const = 0;
};

// A file written sequentially (the GGUF writer, hotlists).
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(std::string_view data) = 0;
  virtual absl::Status Sync() = 0;
  virtual absl::Status Close() = 0;
  virtual uint64_t Size() const = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide posix Env. Never deleted.
  static Env* Default();

  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const ReadOptions& options = {}) = 0;

  // A queue reading `file`, which must outlive it.
  virtual absl::StatusOr<std::unique_ptr<ReadQueue>> NewReadQueue(
      const RandomAccessFile* file, const ReadQueueOptions& options = {}) = 0;

  // Creates or truncates `path`.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;

  virtual absl::StatusOr<uint64_t> GetFileSize(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  // Atomically replaces `to` with `from`.
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual absl::Status DeleteFile(const std::string& path) = 0;
};

// Reads a whole small file (configs, hotlists) into a string.
absl::StatusOr<std::string> ReadFileToString(Env* env, const std::string& path);

// Writes `data` to `path` atomically: a temporary file, fsync, rename.
absl::Status WriteFileAtomically(Env* env, const std::string& path, std::string_view data);

const char* IoEngineName(IoEngine engine);

// For Env implementations: runs `attempt` until it returns OK or an error
// other than UNAVAILABLE (the code every implementation uses for transient
// failures: EIO, EINTR, EAGAIN, short reads that are not EOF), at most
// policy.max_attempts times, sleeping with exponential backoff in between.
// The last error is returned with the number of attempts appended. Adds the
// number of retries made to *retries when it is not null.
absl::Status RetryTransient(const RetryPolicy& policy, absl::FunctionRef<absl::Status()> attempt,
                            std::atomic<uint64_t>* retries = nullptr);

// The pause before retry number `retry` (1 for the first retry).
absl::Duration RetryBackoff(const RetryPolicy& policy, int retry);

}  // namespace waste::storage

#endif  // WASTE_STORAGE_ENV_H_
