// FaultEnv: wraps another Env and injects read faults chosen by file and
// byte range, for tests of retry and error paths (after leveldb's
// db/fault_injection_test.cc):
//   - EIO, for the next N reads (transient) or on every read (permanent);
//   - short reads (a read returns about half of what was asked);
//   - added latency;
//   - corrupted bytes (bits flipped in the returned buffer at chosen file
//     offsets), which only checksums can catch;
//   - random faults: a fraction of all reads, chosen by a seeded generator,
//     fail with EIO for some attempts (or for every attempt), come back
//     short or slow (the daemon's test-only --inject-read-faults).
// Reads of FaultEnv files retry injected EIO and resume after short reads
// per the FaultEnv's RetryPolicy, as the posix Env does for real errors.
// ReadQueues from a FaultEnv run over the faulty file with the thread pool
// (kAuto, kThreads, kIoUring) or synchronously (kSync), so faults show up in
// completions too; Engine() says which.
//
// Ownership: borrows the base Env, which must outlive the FaultEnv.
// Thread safety: all methods may be called from many threads at once
// (faults may be added while reads run).
#ifndef WASTE_STORAGE_FAULT_ENV_H_
#define WASTE_STORAGE_FAULT_ENV_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/env.h"

namespace waste::storage {

// How often a fault fires.
inline constexpr int kFaultForever = -1;

// Counts of faults injected (and retries made) so far.
struct FaultCounters {
  uint64_t eio = 0;
  uint64_t short_reads = 0;
  uint64_t delays = 0;
  uint64_t corrupted_bytes = 0;
  uint64_t retries = 0;  // Attempts repeated after an injected EIO.
  // Random faults only (InjectRandomFaults):
  uint64_t reads = 0;         // Reads of real data seen.
  uint64_t faulty_reads = 0;  // Reads given a fault.
  uint64_t failed_reads = 0;  // Reads that failed with EIO after every retry.
};

// Random faults: each read (a RandomAccessFile::Read, retries included) of
// real data is faulty with probability `rate`. A faulty read is one of, in
// these shares: EIO on every attempt (1/8: the read fails after its
// retries), EIO on 1..max_attempts-1 attempts (3/8: a retry succeeds), a
// short read (3/10) or a slow one (the rest, up to `max_delay`); a quarter
// of the faulty reads are slow besides.
struct RandomFaults {
  double rate = 0;
  uint64_t seed = 1;
  absl::Duration max_delay = absl::Milliseconds(20);
};

class FaultEnv final : public Env {
 public:
  // A byte range of one file (or of every file when `path` is empty). A
  // read is affected when it overlaps [begin, end).
  struct Range {
    std::string path;
    uint64_t begin = 0;
    uint64_t end = std::numeric_limits<uint64_t>::max();
  };

  explicit FaultEnv(Env* base, const RetryPolicy& retry = {});

  // Reads overlapping `range` fail with EIO, `times` times (kFaultForever:
  // every time).
  void InjectEio(const Range& range, int times);
  // Reads overlapping `range` return only part of what was asked, `times`
  // times; the reader must ask again for the rest.
  void InjectShortRead(const Range& range, int times);
  // Reads overlapping `range` take `delay` longer, `times` times.
  void InjectLatency(const Range& range, absl::Duration delay, int times);
  // Reads covering byte `offset` of `path` return it XORed with `mask`,
  // `times` times.
  void InjectCorruption(const std::string& path, uint64_t offset, uint8_t mask = 0x01,
                        int times = kFaultForever);
  // Starts (rate > 0) or stops (rate 0) random faults on every file.
  void InjectRandomFaults(const RandomFaults& faults);
  // Removes every fault, random ones included (counters stay).
  void ClearFaults();
  FaultCounters Counters() const;

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const ReadOptions& options = {}) override;
  absl::StatusOr<std::unique_ptr<ReadQueue>> NewReadQueue(
      const RandomAccessFile* file, const ReadQueueOptions& options = {}) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;

 private:
  friend class FaultRandomAccessFile;

  enum class Kind { kEio, kShortRead, kLatency, kCorrupt };
  struct Fault {
    Kind kind;
    Range range;  // For kCorrupt: [offset, offset + 1).
    int remaining;
    absl::Duration delay;
    uint8_t mask = 0;
  };
  // What one read attempt should suffer, decided under mu_.
  struct Plan {
    bool eio = false;
    bool short_read = false;
    absl::Duration delay;
    std::vector<std::pair<uint64_t, uint8_t>> corruptions;  // File offset, mask.
  };

  // What a random fault does to one read, decided once for all attempts.
  struct RandomFate {
    int eio_attempts = 0;  // Attempts that fail; INT_MAX: all of them.
    bool short_read = false;
    absl::Duration delay;
  };

  void Add(Fault fault);
  Plan PlanRead(const std::string& path, uint64_t offset, size_t n);
  RandomFate DrawFate();
  void CountRandomOutcome(const RandomFate& fate, const absl::Status& status);

  Env* const base_;
  const RetryPolicy retry_;
  mutable absl::Mutex mu_;
  std::vector<Fault> faults_ ABSL_GUARDED_BY(mu_);
  RandomFaults random_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  FaultCounters counters_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> retries_{0};
};

}  // namespace waste::storage

#endif  // WASTE_STORAGE_FAULT_ENV_H_
