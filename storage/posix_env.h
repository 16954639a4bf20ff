// The posix Env: files read with pread (O_DIRECT where the filesystem allows
// it), batches through io_uring or a pread thread pool. Env::Default()
// returns a process-wide instance with the default RetryPolicy; tests build
// their own with NewPosixEnv to get fast backoff.
//
// Thread safety: the Env and its RandomAccessFiles may be used from many
// threads at once; a WritableFile and a ReadQueue by one thread at a time.
#ifndef WASTE_STORAGE_POSIX_ENV_H_
#define WASTE_STORAGE_POSIX_ENV_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "storage/env.h"

namespace waste::storage {

// Counters of a posix Env, for tests and stats. All reads of files opened
// through the Env count, whichever engine served them.
struct PosixEnvStats {
  uint64_t retries = 0;       // Attempts repeated after a transient error.
  uint64_t bounce_reads = 0;  // O_DIRECT reads that went through a bounce buffer.
};

// A RandomAccessFile over a posix file descriptor, which it owns. Exposed so
// that the posix Env's io_uring queue can read the descriptor directly.
class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  struct Counters {
    std::atomic<uint64_t> retries{0};
    std::atomic<uint64_t> bounce_reads{0};
  };

  // Takes ownership of `fd`. `counters` (owned by the Env, which outlives
  // the file) may be null.
  PosixRandomAccessFile(std::string path, int fd, uint64_t size, bool direct,
                        const RetryPolicy& retry, Counters* counters);
  ~PosixRandomAccessFile() override;

  absl::Status Read(uint64_t offset, size_t n, char* buffer) const override;
  uint64_t Size() const override { return size_; }
  const std::string& Path() const override { return path_; }
  bool Direct() const override { return direct_; }
  size_t Alignment() const override;

  int fd() const { return fd_; }
  const RetryPolicy& retry_policy() const { return retry_; }
  Counters* counters() const { return counters_; }

 private:
  // Reads [offset, offset + n) into `buffer`, which satisfies the alignment
  // rules when direct_; `need` <= n bytes must arrive (the rest may lie past
  // EOF, as the tail of an aligned bounce read does).
  absl::Status ReadAligned(uint64_t offset, size_t n, size_t need, char* buffer) const;
  absl::Status ReadBounced(uint64_t offset, size_t n, char* buffer) const;

  const std::string path_;
  const int fd_;
  const uint64_t size_;
  const bool direct_;
  const RetryPolicy retry_;
  Counters* const counters_;
};

class PosixEnv final : public Env {
 public:
  explicit PosixEnv(const RetryPolicy& retry = {});

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const ReadOptions& options = {}) override;
  // io_uring queues need a file opened by a posix Env; any other file is
  // served by the thread pool (kAuto, kThreads) or synchronously (kSync).
  absl::StatusOr<std::unique_ptr<ReadQueue>> NewReadQueue(
      const RandomAccessFile* file, const ReadQueueOptions& options = {}) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  // Also fsyncs the destination's directory so the rename survives a crash.
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;

  PosixEnvStats Stats() const;

 private:
  const RetryPolicy retry_;
  mutable PosixRandomAccessFile::Counters counters_;
};

// A posix Env with its own RetryPolicy (the caller owns it).
std::unique_ptr<PosixEnv> NewPosixEnv(const RetryPolicy& retry);

// The status for a failed system call: `errno_value` mapped to a code
// (EIO, EINTR and EAGAIN to UNAVAILABLE, so that RetryTransient retries
// them), with `context` and the errno text in the message.
absl::Status PosixError(int errno_value, std::string_view context);

// Which engine kAuto resolves to on this machine: kIoUring when an io_uring
// instance can be created, else kThreads. Probed once; the result is logged.
IoEngine ResolveAutoEngine();

}  // namespace waste::storage

#endif  // WASTE_STORAGE_POSIX_ENV_H_
