#include "storage/posix_env.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "storage/aligned_buffer.h"
#include "storage/io_uring_queue.h"
#include "storage/thread_pool_queue.h"

namespace waste::storage {
namespace {

// Bounce reads go through buffers of at most this size, so that an unaligned
// read of a whole tensor does not double its memory.
constexpr size_t kMaxBounce = 4 << 20;

// pread returns at most about 2 GiB per call on Linux; asking for more in one
// call is harmless but we keep requests in a range every kernel accepts.
constexpr size_t kMaxPread = size_t{1} << 30;

std::string ReadContext(const std::string& path, uint64_t offset, size_t n) {
  return absl::StrFormat("read of %s at offset %d length %d", path, offset, n);
}

absl::Status CloseFd(int fd, const std::string& path) {
  if (close(fd) != 0) return PosixError(errno, "close " + path);
  return absl::OkStatus();
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) Close().IgnoreError();
  }

  absl::Status Append(std::string_view data) override {
    if (fd_ < 0) return absl::FailedPreconditionError("append to closed file " + path_);
    size_ += data.size();
    if (buffer_.size() + data.size() <= kBufferSize) {
      buffer_.append(data);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(Flush());
    if (data.size() >= kBufferSize) return WriteAll(data);
    buffer_.append(data);
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    if (fd_ < 0) return absl::FailedPreconditionError("sync of closed file " + path_);
    RETURN_IF_ERROR(Flush());
    if (fsync(fd_) != 0) return PosixError(errno, "fsync " + path_);
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    absl::Status status = Flush();
    absl::Status closed = CloseFd(fd_, path_);
    fd_ = -1;
    return status.ok() ? closed : status;
  }

  uint64_t Size() const override { return size_; }

 private:
  static constexpr size_t kBufferSize = 1 << 20;

  absl::Status Flush() {
    absl::Status status = WriteAll(buffer_);
    buffer_.clear();
    return status;
  }

  absl::Status WriteAll(std::string_view data) {
    while (!data.empty()) {
      ssize_t written = write(fd_, data.data(), std::min(data.size(), kMaxPread));
      if (written < 0) {
        if (errno == EINTR) continue;
        return PosixError(errno, "write to " + path_);
      }
      data.remove_prefix(static_cast<size_t>(written));
    }
    return absl::OkStatus();
  }

  const std::string path_;
  int fd_;
  uint64_t size_ = 0;
  std::string buffer_;
};

}  // namespace

absl::Status PosixError(int errno_value, std::string_view context) {
  std::string message =
      absl::StrCat(std::string(context), ": ", strerror(errno_value), " (errno ", errno_value, ")");
  switch (errno_value) {
    case EIO:
    case EINTR:
    case EAGAIN:
      return absl::UnavailableError(message);
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case ENOMEM:
    case EMFILE:
      return absl::ResourceExhaustedError(message);
    case EINVAL:
      return absl::InvalidArgumentError(message);
    default:
      return absl::Status(absl::ErrnoToStatusCode(errno_value), message);
  }
}

PosixRandomAccessFile::PosixRandomAccessFile(std::string path, int fd, uint64_t size, bool direct,
                                             const RetryPolicy& retry, Counters* counters)
    : path_(std::move(path)),
      fd_(fd),
      size_(size),
      direct_(direct),
      retry_(retry),
      counters_(counters) {}

PosixRandomAccessFile::~PosixRandomAccessFile() { close(fd_); }

size_t PosixRandomAccessFile::Alignment() const { return direct_ ? kDirectIoAlignment : 1; }

absl::Status PosixRandomAccessFile::Read(uint64_t offset, size_t n, char* buffer) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(absl::StrFormat("%s is past the end of the file (size %d)",
                                                 ReadContext(path_, offset, n), size_));
  }
  if (n == 0) return absl::OkStatus();
  if (!direct_ || (IsAligned(offset, kDirectIoAlignment) && IsAligned(n, kDirectIoAlignment) &&
                   IsAligned(buffer, kDirectIoAlignment))) {
    return ReadAligned(offset, n, n, buffer);
  }
  return ReadBounced(offset, n, buffer);
}

absl::Status PosixRandomAccessFile::ReadBounced(uint64_t offset, size_t n, char* buffer) const {
  if (counters_ != nullptr) counters_->bounce_reads.fetch_add(1, std::memory_order_relaxed);
  const uint64_t end = offset + n;
  AlignedBuffer bounce(std::min<uint64_t>(
      kMaxBounce, AlignUp(end, kDirectIoAlignment) - AlignDown(offset, kDirectIoAlignment)));
  if (bounce.data() == nullptr) {
    return absl::ResourceExhaustedError("no memory for the bounce buffer of " +
                                        ReadContext(path_, offset, n));
  }
  uint64_t pos = offset;
  while (pos < end) {
    const uint64_t block = AlignDown(pos, kDirectIoAlignment);
    const uint64_t block_end =
        std::min<uint64_t>(block + bounce.size(), AlignUp(end, kDirectIoAlignment));
    const size_t want = static_cast<size_t>(std::min(end, block_end) - block);
    RETURN_IF_ERROR(ReadAligned(block, block_end - block, want, bounce.data()));
    const size_t skip = static_cast<size_t>(pos - block);
    std::memcpy(buffer + (pos - offset), bounce.data() + skip, want - skip);
    pos = block + want;
  }
  return absl::OkStatus();
}

absl::Status PosixRandomAccessFile::ReadAligned(uint64_t offset, size_t n, size_t need,
                                                char* buffer) const {
  // Progress survives retries: a transient error after a short read resumes
  // where the short read stopped.
  size_t done = 0;
  size_t furthest = 0;  // An O_DIRECT resume re-reads its partial block.
  auto attempt = [&]() -> absl::Status {
    while (done < need) {
      // An O_DIRECT continuation must start on a block boundary; re-reading
      // the partial block is cheaper than bouncing it.
      if (direct_) done = AlignDown(done, kDirectIoAlignment);
      const size_t len = std::min(n - done, kMaxPread);
      ssize_t got = pread(fd_, buffer + done, len, static_cast<off_t>(offset + done));
      if (got < 0) {
        return PosixError(errno, ReadContext(path_, offset, n));
      }
      if (got == 0 || done + static_cast<size_t>(got) <= furthest) {
        // The size was checked at open, so EOF here (nothing read, or no
        // further than before) means the file shrank under us: not
        // transient, the data is gone.
        return absl::DataLossError(absl::StrFormat(
            "%s: unexpected end of file after %d bytes (the file shrank from %d bytes?)",
            ReadContext(path_, offset, n), std::max(done, furthest), size_));
      }
      done += static_cast<size_t>(got);
      furthest = done;
    }
    return absl::OkStatus();
  };
  return RetryTransient(retry_, attempt, counters_ ? &counters_->retries : nullptr);
}

PosixEnv::PosixEnv(const RetryPolicy& retry) : retry_(retry) {}

std::unique_ptr<PosixEnv> NewPosixEnv(const RetryPolicy& retry) {
  return std::make_unique<PosixEnv>(retry);
}

PosixEnvStats PosixEnv::Stats() const {
  return {counters_.retries.load(std::memory_order_relaxed),
          counters_.bounce_reads.load(std::memory_order_relaxed)};
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> PosixEnv::NewRandomAccessFile(
    const std::string& path, const ReadOptions& options) {
  int flags = O_RDONLY | O_CLOEXEC;
  bool direct = false;
  int fd = -1;
  if (options.direct) {
    fd = open(path.c_str(), flags | O_DIRECT);
    if (fd >= 0) {
      direct = true;
    } else if (errno == EINVAL) {
      // tmpfs and some FUSE filesystems refuse O_DIRECT; reading through the
      // page cache still works, only slower and costing RAM.
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        WLOG(WARNING) << "O_DIRECT is not supported for " << path
                      << "; reading through the page cache instead (logged once)";
      }
    } else {
      return PosixError(errno, "open " + path);
    }
  }
  if (fd < 0) fd = open(path.c_str(), flags);
  if (fd < 0) return PosixError(errno, "open " + path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status status = PosixError(errno, "stat " + path);
    close(fd);
    return status;
  }
  return std::make_unique<PosixRandomAccessFile>(path, fd, static_cast<uint64_t>(st.st_size),
                                                 direct, retry_, &counters_);
}

absl::StatusOr<std::unique_ptr<ReadQueue>> PosixEnv::NewReadQueue(const RandomAccessFile* file,
                                                                  const ReadQueueOptions& options) {
  if (file == nullptr) return absl::InvalidArgumentError("NewReadQueue: file is null");
  if (options.depth < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("NewReadQueue: depth must be at least 1, got ", options.depth));
  }
  const auto* posix_file = dynamic_cast<const PosixRandomAccessFile*>(file);
  IoEngine engine = options.engine;
  if (engine == IoEngine::kAuto) {
    engine = posix_file != nullptr ? ResolveAutoEngine() : IoEngine::kThreads;
  }
  switch (engine) {
    case IoEngine::kIoUring:
      if (posix_file == nullptr) {
        return absl::InvalidArgumentError("io_uring needs a file opened by the posix Env: " +
                                          file->Path());
      }
      return IoUringReadQueue::Create(posix_file, options.depth);
    case IoEngine::kThreads:
      return std::unique_ptr<ReadQueue>(
          std::make_unique<ThreadPoolReadQueue>(file, options.threads, options.depth));
    case IoEngine::kSync:
    case IoEngine::kAuto:
      break;
  }
  return std::unique_ptr<ReadQueue>(std::make_unique<SyncReadQueue>(file));
}

absl::StatusOr<std::unique_ptr<WritableFile>> PosixEnv::NewWritableFile(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return PosixError(errno, "create " + path);
  return std::make_unique<PosixWritableFile>(path, fd);
}

absl::StatusOr<uint64_t> PosixEnv::GetFileSize(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return PosixError(errno, "stat " + path);
  return static_cast<uint64_t>(st.st_size);
}

bool PosixEnv::FileExists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

absl::Status PosixEnv::RenameFile(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0) {
    return PosixError(errno, "rename " + from + " to " + to);
  }
  std::string dir_buffer = to;
  const char* dir = dirname(dir_buffer.data());
  int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return PosixError(errno, std::string("open directory ") + dir);
  absl::Status status;
  if (fsync(dir_fd) != 0) status = PosixError(errno, std::string("fsync directory ") + dir);
  close(dir_fd);
  return status;
}

absl::Status PosixEnv::DeleteFile(const std::string& path) {
  if (unlink(path.c_str()) != 0) return PosixError(errno, "delete " + path);
  return absl::OkStatus();
}

}  // namespace waste::storage
