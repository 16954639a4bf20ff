// The parts of env.h that do not depend on one implementation.
#include "storage/env.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/posix_env.h"

namespace waste::storage {

Env* Env::Default() {
  // Leaked on purpose: files opened through it may outlive static destruction.
  static Env* const env = new PosixEnv();
  return env;
}

absl::StatusOr<std::string> ReadFileToString(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  std::string data(file->Size(), '\0');
  RETURN_IF_ERROR(file->Read(0, data.size(), data.data()));
  return data;
}

absl::Status WriteFileAtomically(Env* env, const std::string& path, std::string_view data) {
  // Unique per process and call, so concurrent writers of one path never
  // share a temporary file; the last rename wins.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      absl::StrCat(path, ".tmp.", getpid(), ".", counter.fetch_add(1, std::memory_order_relaxed));
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(tmp));
    RETURN_IF_ERROR(file->Append(data));
    RETURN_IF_ERROR(file->Sync());
    RETURN_IF_ERROR(file->Close());
    return env->RenameFile(tmp, path);
  }();
  if (!status.ok() && env->FileExists(tmp)) env->DeleteFile(tmp).IgnoreError();
  return status;
}

const char* IoEngineName(IoEngine engine) {
  switch (engine) {
    case IoEngine::kAuto:
      return "auto";
    case IoEngine::kIoUring:
      return "io_uring";
    case IoEngine::kThreads:
      return "threads";
    case IoEngine::kSync:
      return "sync";
  }
  return "unknown";
}

absl::Duration RetryBackoff(const RetryPolicy& policy, int retry) {
  return policy.initial_backoff * std::pow(policy.backoff_multiplier, std::max(0, retry - 1));
}

absl::Status RetryTransient(const RetryPolicy& policy, absl::FunctionRef<absl::Status()> attempt,
                            std::atomic<uint64_t>* retries) {
  const int max_attempts = std::max(1, policy.max_attempts);
  absl::Status status;
  for (int i = 1; i <= max_attempts; ++i) {
    if (i > 1) {
      if (retries != nullptr) retries->fetch_add(1, std::memory_order_relaxed);
      absl::SleepFor(RetryBackoff(policy, i - 1));
    }
    status = attempt();
    if (status.code() != absl::StatusCode::kUnavailable) return status;
  }
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (gave up after ", max_attempts,
                                   max_attempts == 1 ? " attempt)" : " attempts)"));
}

}  // namespace waste::storage
