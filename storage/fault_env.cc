#include "storage/fault_env.h"

#include <errno.h>
#include <string.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/thread_pool_queue.h"

namespace waste::storage {

class FaultRandomAccessFile final : public RandomAccessFile {
 public:
  FaultRandomAccessFile(FaultEnv* env, std::unique_ptr<RandomAccessFile> base)
      : env_(env), base_(std::move(base)) {}

  absl::Status Read(uint64_t offset, size_t n, char* buffer) const override {
    // The base file reports reads past the end; faults apply to real data.
    if (offset > Size() || n > Size() - offset) return base_->Read(offset, n, buffer);
    FaultEnv::RandomFate fate = env_->DrawFate();
    if (fate.delay > absl::ZeroDuration()) absl::SleepFor(fate.delay);
    // Progress survives retries, as in the posix Env.
    size_t done = 0;
    auto attempt = [&]() -> absl::Status {
      if (fate.eio_attempts > 0) {
        if (fate.eio_attempts != INT_MAX) --fate.eio_attempts;
        return absl::UnavailableError(
            absl::StrFormat("read of %s at offset %d length %d: %s (errno %d, injected)", Path(),
                            offset, n, strerror(EIO), EIO));
      }
      while (done < n) {
        const uint64_t pos = offset + done;
        FaultEnv::Plan plan = env_->PlanRead(Path(), pos, n - done);
        plan.short_read |= std::exchange(fate.short_read, false);
        if (plan.delay > absl::ZeroDuration()) absl::SleepFor(plan.delay);
        if (plan.eio) {
          return absl::UnavailableError(
              absl::StrFormat("read of %s at offset %d length %d: %s (errno %d, injected)", Path(),
                              offset, n, strerror(EIO), EIO));
        }
        const size_t len = plan.short_read ? std::max<size_t>(1, (n - done) / 2) : n - done;
        RETURN_IF_ERROR(base_->Read(pos, len, buffer + done));
        for (const auto& [at, mask] : plan.corruptions) {
          if (at >= pos && at < pos + len) buffer[at - offset] ^= static_cast<char>(mask);
        }
        done += len;
      }
      return absl::OkStatus();
    };
    absl::Status status = RetryTransient(env_->retry_, attempt, &env_->retries_);
    env_->CountRandomOutcome(fate, status);
    return status;
  }

  uint64_t Size() const override { return base_->Size(); }
  const std::string& Path() const override { return base_->Path(); }
  bool Direct() const override { return base_->Direct(); }
  size_t Alignment() const override { return base_->Alignment(); }

 private:
  FaultEnv* const env_;
  const std::unique_ptr<RandomAccessFile> base_;
};

FaultEnv::FaultEnv(Env* base, const RetryPolicy& retry) : base_(base), retry_(retry) {}

void FaultEnv::Add(Fault fault) {
  absl::MutexLock lock(&mu_);
  faults_.push_back(std::move(fault));
}

void FaultEnv::InjectEio(const Range& range, int times) {
  Add({Kind::kEio, range, times, absl::ZeroDuration()});
}

void FaultEnv::InjectShortRead(const Range& range, int times) {
  Add({Kind::kShortRead, range, times, absl::ZeroDuration()});
}

void FaultEnv::InjectLatency(const Range& range, absl::Duration delay, int times) {
  Add({Kind::kLatency, range, times, delay});
}

void FaultEnv::InjectCorruption(const std::string& path, uint64_t offset, uint8_t mask, int times) {
  Add({Kind::kCorrupt, {path, offset, offset + 1}, times, absl::ZeroDuration(), mask});
}

void FaultEnv::InjectRandomFaults(const RandomFaults& faults) {
  absl::MutexLock lock(&mu_);
  random_ = faults;
  rng_.seed(faults.seed);
}

void FaultEnv::ClearFaults() {
  absl::MutexLock lock(&mu_);
  faults_.clear();
  random_.rate = 0;
}

FaultEnv::RandomFate FaultEnv::DrawFate() {
  RandomFate fate;
  absl::MutexLock lock(&mu_);
  if (random_.rate <= 0) return fate;
  ++counters_.reads;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  if (uniform(rng_) >= random_.rate) return fate;
  ++counters_.faulty_reads;
  const double kind = uniform(rng_);
  const int attempts = std::max(1, retry_.max_attempts);
  auto delay = [&] { return random_.max_delay * uniform(rng_); };
  if (kind < 0.125) {
    fate.eio_attempts = INT_MAX;
  } else if (kind < 0.5) {
    fate.eio_attempts = attempts > 1 ? 1 + static_cast<int>(rng_() % (attempts - 1)) : 0;
  } else if (kind < 0.8) {
    fate.short_read = true;
  } else {
    fate.delay = delay();
  }
  if (uniform(rng_) < 0.25) fate.delay += delay();
  if (fate.eio_attempts > 0) counters_.eio += std::min(fate.eio_attempts, attempts);
  if (fate.short_read) ++counters_.short_reads;
  if (fate.delay > absl::ZeroDuration()) ++counters_.delays;
  return fate;
}

void FaultEnv::CountRandomOutcome(const RandomFate& fate, const absl::Status& status) {
  if (fate.eio_attempts != INT_MAX || status.ok()) return;
  absl::MutexLock lock(&mu_);
  ++counters_.failed_reads;
}

FaultCounters FaultEnv::Counters() const {
  absl::MutexLock lock(&mu_);
  FaultCounters counters = counters_;
  counters.retries = retries_.load(std::memory_order_relaxed);
  return counters;
}

FaultEnv::Plan FaultEnv::PlanRead(const std::string& path, uint64_t offset, size_t n) {
  Plan plan;
  absl::MutexLock lock(&mu_);
  for (Fault& fault : faults_) {
    const bool hits = (fault.range.path.empty() || fault.range.path == path) &&
                      offset < fault.range.end && fault.range.begin < offset + n;
    if (!hits || fault.remaining == 0) continue;
    if (fault.remaining > 0) --fault.remaining;
    switch (fault.kind) {
      case Kind::kEio:
        plan.eio = true;
        ++counters_.eio;
        break;
      case Kind::kShortRead:
        plan.short_read = true;
        ++counters_.short_reads;
        break;
      case Kind::kLatency:
        plan.delay += fault.delay;
        ++counters_.delays;
        break;
      case Kind::kCorrupt:
        plan.corruptions.emplace_back(fault.range.begin, fault.mask);
        ++counters_.corrupted_bytes;
        break;
    }
  }
  std::erase_if(faults_, [](const Fault& fault) { return fault.remaining == 0; });
  return plan;
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> FaultEnv::NewRandomAccessFile(
    const std::string& path, const ReadOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> base,
                   base_->NewRandomAccessFile(path, options));
  return std::make_unique<FaultRandomAccessFile>(this, std::move(base));
}

absl::StatusOr<std::unique_ptr<ReadQueue>> FaultEnv::NewReadQueue(const RandomAccessFile* file,
                                                                  const ReadQueueOptions& options) {
  if (file == nullptr) return absl::InvalidArgumentError("NewReadQueue: file is null");
  if (options.engine == IoEngine::kSync) {
    return std::unique_ptr<ReadQueue>(std::make_unique<SyncReadQueue>(file));
  }
  return std::unique_ptr<ReadQueue>(
      std::make_unique<ThreadPoolReadQueue>(file, options.threads, options.depth));
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultEnv::NewWritableFile(const std::string& path) {
  return base_->NewWritableFile(path);
}

absl::StatusOr<uint64_t> FaultEnv::GetFileSize(const std::string& path) {
  return base_->GetFileSize(path);
}

bool FaultEnv::FileExists(const std::string& path) { return base_->FileExists(path); }

absl::Status FaultEnv::RenameFile(const std::string& from, const std::string& to) {
  return base_->RenameFile(from, to);
}

absl::Status FaultEnv::DeleteFile(const std::string& path) { return base_->DeleteFile(path); }

}  // namespace waste::storage
