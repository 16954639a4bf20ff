// MemEnv: an Env whose files live in memory, for tests of everything above
// storage (after leveldb's helpers/memenv). Batches are served by the thread
// pool (kAuto, kThreads) or synchronously (kSync); kIoUring is refused.
//
// Semantics: a RandomAccessFile sees the file's size as of opening; later
// appends are visible to it only below that size. NewWritableFile truncates
// by replacing the file, so readers of the old one keep its old bytes.
// ReadOptions.direct is accepted and ignored (Direct() is false).
//
// Thread safety: everything may be used from many threads at once, except
// that a WritableFile or ReadQueue is used by one thread at a time.
#ifndef WASTE_STORAGE_MEM_ENV_H_
#define WASTE_STORAGE_MEM_ENV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/env.h"

namespace waste::storage {

class MemEnv final : public Env {
 public:
  MemEnv() = default;

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const ReadOptions& options = {}) override;
  absl::StatusOr<std::unique_ptr<ReadQueue>> NewReadQueue(
      const RandomAccessFile* file, const ReadQueueOptions& options = {}) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;

  // Creates or replaces `path` with `contents` in one step (test setup).
  void SetFile(const std::string& path, std::string contents);

  // Shared between the Env's map, readers and the writer of one file.
  struct FileData {
    absl::Mutex mu;
    std::string bytes ABSL_GUARDED_BY(mu);
  };

 private:
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<FileData>> files_ ABSL_GUARDED_BY(mu_);
};

}  // namespace waste::storage

#endif  // WASTE_STORAGE_MEM_ENV_H_
