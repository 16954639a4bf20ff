#include "storage/mem_env.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "storage/thread_pool_queue.h"

namespace waste::storage {
namespace {

using FileData = MemEnv::FileData;

class MemRandomAccessFile final : public RandomAccessFile {
 public:
  MemRandomAccessFile(std::string path, std::shared_ptr<FileData> data, uint64_t size)
      : path_(std::move(path)), data_(std::move(data)), size_(size) {}

  absl::Status Read(uint64_t offset, size_t n, char* buffer) const override {
    if (offset > size_ || n > size_ - offset) {
      return absl::OutOfRangeError(
          absl::StrFormat("read of %s at offset %d length %d is past the end of the file (size %d)",
                          path_, offset, n, size_));
    }
    absl::MutexLock lock(&data_->mu);
    // Appends only grow the bytes and truncation makes a new FileData, so
    // everything below size_ is still there.
    std::memcpy(buffer, data_->bytes.data() + offset, n);
    return absl::OkStatus();
  }
  uint64_t Size() const override { return size_; }
  const std::string& Path() const override { return path_; }
  bool Direct() const override { return false; }
  size_t Alignment() const override { return 1; }

 private:
  const std::string path_;
  const std::shared_ptr<FileData> data_;
  const uint64_t size_;
};

class MemWritableFile final : public WritableFile {
 public:
  MemWritableFile(std::string path, std::shared_ptr<FileData> data)
      : path_(std::move(path)), data_(std::move(data)) {}

  absl::Status Append(std::string_view data) override {
    if (closed_) return absl::FailedPreconditionError("append to closed file " + path_);
    absl::MutexLock lock(&data_->mu);
    data_->bytes.append(data);
    size_ += data.size();
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (closed_) return absl::FailedPreconditionError("sync of closed file " + path_);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    closed_ = true;
    return absl::OkStatus();
  }
  uint64_t Size() const override { return size_; }

 private:
  const std::string path_;
  const std::shared_ptr<FileData> data_;
  uint64_t size_ = 0;
  bool closed_ = false;
};

absl::Status NotFound(const std::string& path) {
  return absl::NotFoundError(absl::StrFormat("%s: no such file (in MemEnv)", path));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RandomAccessFile>> MemEnv::NewRandomAccessFile(
    const std::string& path, const ReadOptions& /*options*/) {
  std::shared_ptr<FileData> data;
  {
    absl::MutexLock lock(&mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return NotFound(path);
    data = it->second;
  }
  uint64_t size;
  {
    absl::MutexLock lock(&data->mu);
    size = data->bytes.size();
  }
  return std::make_unique<MemRandomAccessFile>(path, std::move(data), size);
}

absl::StatusOr<std::unique_ptr<ReadQueue>> MemEnv::NewReadQueue(const RandomAccessFile* file,
                                                                const ReadQueueOptions& options) {
  if (file == nullptr) return absl::InvalidArgumentError("NewReadQueue: file is null");
  switch (options.engine) {
    case IoEngine::kIoUring:
      return absl::UnimplementedError("MemEnv has no io_uring engine; use kAuto or kThreads");
    case IoEngine::kSync:
      return std::unique_ptr<ReadQueue>(std::make_unique<SyncReadQueue>(file));
    case IoEngine::kAuto:
    case IoEngine::kThreads:
      break;
  }
  return std::unique_ptr<ReadQueue>(
      std::make_unique<ThreadPoolReadQueue>(file, options.threads, options.depth));
}

absl::StatusOr<std::unique_ptr<WritableFile>> MemEnv::NewWritableFile(const std::string& path) {
  auto data = std::make_shared<FileData>();
  {
    absl::MutexLock lock(&mu_);
    files_[path] = data;
  }
  return std::make_unique<MemWritableFile>(path, std::move(data));
}

absl::StatusOr<uint64_t> MemEnv::GetFileSize(const std::string& path) {
  std::shared_ptr<FileData> data;
  {
    absl::MutexLock lock(&mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return NotFound(path);
    data = it->second;
  }
  absl::MutexLock lock(&data->mu);
  return static_cast<uint64_t>(data->bytes.size());
}

bool MemEnv::FileExists(const std::string& path) {
  absl::MutexLock lock(&mu_);
  return files_.count(path) > 0;
}

absl::Status MemEnv::RenameFile(const std::string& from, const std::string& to) {
  absl::MutexLock lock(&mu_);
  auto it = files_.find(from);
  if (it == files_.end()) return NotFound(from);
  std::shared_ptr<FileData> data = std::move(it->second);
  files_.erase(it);
  files_[to] = std::move(data);
  return absl::OkStatus();
}

absl::Status MemEnv::DeleteFile(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (files_.erase(path) == 0) return NotFound(path);
  return absl::OkStatus();
}

void MemEnv::SetFile(const std::string& path, std::string contents) {
  auto data = std::make_shared<FileData>();
  {
    absl::MutexLock lock(&data->mu);
    data->bytes = std::move(contents);
  }
  absl::MutexLock lock(&mu_);
  files_[path] = std::move(data);
}

}  // namespace waste::storage
