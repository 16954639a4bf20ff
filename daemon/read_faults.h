// Test-only read faults for the real daemon: `wasted serve
// --inject-read-faults RATE[:SEED]` wraps the daemon's Env in a
// storage::FaultEnv whose random faults (storage/fault_env.h: RandomFaults)
// hit that fraction of every read of a model file: EIO for some attempts
// (retried) or all of them (the read fails: the request that needed it ends
// UNAVAILABLE, naming the file, offset and "injected"), short reads and slow
// reads. The counters are logged when the daemon stops, for the fault-storm
// test (tests/soak/fault_storm_test.cc). Never for production.
#ifndef WASTE_DAEMON_READ_FAULTS_H_
#define WASTE_DAEMON_READ_FAULTS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/env.h"
#include "storage/fault_env.h"

namespace waste {

// "RATE" or "RATE:SEED": 0 <= RATE <= 1, SEED an unsigned integer (default
// 1).
absl::StatusOr<storage::RandomFaults> ParseReadFaults(absl::string_view spec);

class ReadFaultInjection {
 public:
  // `base` must outlive this object (and this object every user of env()).
  ReadFaultInjection(storage::Env* base, const storage::RandomFaults& faults);
  // Logs the counters.
  ~ReadFaultInjection();

  storage::Env* env() { return &env_; }
  std::string Summary() const;

 private:
  storage::FaultEnv env_;
};

}  // namespace waste

#endif  // WASTE_DAEMON_READ_FAULTS_H_
