#include "daemon/read_faults.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace waste {

absl::StatusOr<storage::RandomFaults> ParseReadFaults(absl::string_view spec) {
  std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
  storage::RandomFaults faults;
  if (parts.size() > 2 || !absl::SimpleAtod(parts[0], &faults.rate) || !(faults.rate >= 0) ||
      faults.rate > 1 || (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &faults.seed))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--inject-read-faults wants RATE[:SEED] with 0 <= RATE <= 1, not '", spec, "'"));
  }
  return faults;
}

ReadFaultInjection::ReadFaultInjection(storage::Env* base, const storage::RandomFaults& faults)
    : env_(base) {
  env_.InjectRandomFaults(faults);
  WLOG(WARNING) << "TESTING: injecting read faults into " << faults.rate * 100
                << "% of model file reads (seed " << faults.seed << ")";
}

// A warning, so that it shows at every log level.
ReadFaultInjection::~ReadFaultInjection() { WLOG(WARNING) << Summary(); }

std::string ReadFaultInjection::Summary() const {
  const storage::FaultCounters c = env_.Counters();
  return absl::StrCat("read fault injection: reads=", c.reads, " faulty=", c.faulty_reads,
                      " eio=", c.eio, " short=", c.short_reads, " slow=", c.delays,
                      " retries=", c.retries, " failed_after_retries=", c.failed_reads);
}

}  // namespace waste
