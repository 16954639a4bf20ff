// The soak driver: one real daemon serving stories260K with most of its
// weights streamed (a RAM budget just over the plan's floor, KV caches for
// four sessions), and concurrent clients sending thousands of mixed
// requests through the client library: greedy generations checked against
// the golden tokens (tests/testdata.h), sampled generations, chat,
// generations cancelled mid-stream, tokenize/detokenize, kept sessions
// continued (and saved with SaveSession), load, unload, list, stats and
// plan. It counts every outcome, samples the daemon's resident memory
// (/proc/PID/status VmRSS and RssAnon, its private part, on which drift is
// measured) and its peak (VmHWM), and stops the daemon
// with SIGTERM at the end (it must exit 0).
//
// With read faults (--inject-read-faults, daemon/read_faults.h) it is the
// fault storm: a request may then also end UNAVAILABLE because a read of
// the model failed after its retries (the message says "injected"); any
// other failure is unexpected, and after such a failure the client's next
// request is a checked golden one.
//
// Used by soak_test and fault_storm_test (short forms in the suite) and by
// the `soak` binary (long form by hand: bazel run --config=opt
// //tests/soak:soak -- --duration 1h).
#ifndef WASTE_TESTS_SOAK_SOAK_H_
#define WASTE_TESTS_SOAK_SOAK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace waste::soak {

struct SoakOptions {
  // A directory holding stories260K.gguf (a symlink is fine).
  std::string models_dir;
  // The daemon's state directory (kept sessions); empty: a fresh one.
  std::string state_dir;
  int clients = 4;
  // Measured time after the warm-up; the run also stops after
  // max_requests requests (0: no limit), whichever comes first.
  absl::Duration duration = absl::Seconds(90);
  int64_t max_requests = 0;
  // Not measured: RSS settles (allocator arenas, the model's first load).
  absl::Duration warmup = absl::Seconds(10);
  // Compute threads per model in the daemon.
  int threads = 1;
  // Fraction of the model's reads that get a fault (0: none).
  double read_fault_rate = 0;
  uint64_t seed = 1;
  // Print a progress line this often (0: never).
  absl::Duration progress_every = absl::ZeroDuration();
  // Only these operations (names as in the report: generate_golden, ...,
  // unload; empty: all), to find which one a problem follows.
  std::vector<std::string> only_ops;
  // When set, every RSS sample goes there ("SECONDS BYTES" lines, seconds
  // since the measured part began).
  std::string rss_log;
};

struct OpCounts {
  int64_t ok = 0;
  int64_t expected_errors = 0;    // e.g. NOT_FOUND unloading what is not loaded.
  int64_t injected_failures = 0;  // UNAVAILABLE from an injected read fault.
  int64_t unexpected_errors = 0;
};

struct SoakReport {
  absl::Duration measured;  // Excluding the warm-up.
  int64_t requests = 0;     // RPCs, warm-up included.
  std::map<std::string, OpCounts> ops;
  int64_t unexpected_errors = 0;
  std::vector<std::string> error_samples;  // The first few, with their op.
  int64_t golden_checked = 0;              // Token sequences compared.
  int64_t golden_mismatches = 0;
  int64_t injected_failures = 0;
  int64_t checks_after_failure = 0;  // Golden requests right after one.
  int64_t correct_after_failure = 0;
  // Memory of the daemon, in bytes.
  int64_t ram_budget_bytes = 0;
  int64_t runtime_reserve_bytes = 0;  // The plan's, included in the floor.
  int64_t rss_first_tenth = 0;        // Median VmRSS in the first tenth.
  int64_t rss_last_tenth = 0;         // ... and in the last.
  // The same of RssAnon: the daemon's private memory (heap, stacks, pool,
  // KV caches). VmRSS also counts pages of shared libraries (gRPC alone has
  // 5 MiB), which the kernel maps in as code first runs and pages out when
  // idle: not memory the daemon holds.
  int64_t anon_first_tenth = 0;
  int64_t anon_last_tenth = 0;
  double rss_drift = 0;     // (anon last - anon first) / anon first.
  double vm_rss_drift = 0;  // The same of VmRSS.
  int64_t rss_peak = 0;     // VmHWM at the end.
  int64_t rss_samples = 0;
  int64_t bytes_read_per_token = 0;  // From the plan: streamed weights.
  int daemon_exit_code = -1;
  // The daemon's "read fault injection: ..." line, and its counts.
  std::string fault_summary;
  int64_t reads_failed_after_retries = -1;

  // The long form's memory verdict: VmRSS drifted under 2 %, and private
  // memory under 2 % or kPrivateSlackBytes, whichever is more (a 5 MiB
  // private set moves by a few hundred KiB as malloc trims its arenas at one
  // moment or another: heaptrack showed the live heap flat over 20 minutes
  // while RssAnon's medians moved by +0.33 MiB), and peaked at most at the
  // budget plus the runtime reserve.
  static constexpr int64_t kPrivateSlackBytes = 512 << 10;
  bool MemoryStable() const;

  std::string ToText() const;
  std::string ToJson() const;
};

absl::StatusOr<SoakReport> RunSoak(const SoakOptions& options);

}  // namespace waste::soak

#endif  // WASTE_TESTS_SOAK_SOAK_H_
