// How much RAM this process may use, detected honestly: a cgroup memory
// limit when one applies (cgroup v2 `memory.max`, or the v1 memory
// controller's `memory.limit_in_bytes`, each taken as the smallest along the
// process's cgroup path), else the machine's physical memory. The answer
// names where it came from so `wasted plan` can say why it chose a budget.
//
// Thread-safety: free functions with no shared state.
#ifndef WASTE_DAEMON_MEMORY_USABLE_RAM_H_
#define WASTE_DAEMON_MEMORY_USABLE_RAM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace waste::memory {

struct UsableRam {
  uint64_t bytes = 0;            // What this process may use: min(limit, physical).
  uint64_t physical_bytes = 0;   // MemTotal.
  uint64_t available_bytes = 0;  // MemAvailable now (what others leave free).
  std::string source;            // "cgroup v1 memory.limit_in_bytes of /x", "MemTotal", ...
};

// Where the probe reads from; tests point these at a fake tree.
struct RamProbePaths {
  std::string proc_self_cgroup = "/proc/self/cgroup";
  std::string proc_meminfo = "/proc/meminfo";
  std::string cgroup_root = "/sys/fs/cgroup";  // v1 controllers under it; v2 here or at unified/.
};

// Reads /proc/meminfo and the cgroup files. Fails only when /proc/meminfo
// cannot be read or parsed; missing cgroup files mean "no limit".
absl::StatusOr<UsableRam> DetectUsableRam(const RamProbePaths& paths = {});

}  // namespace waste::memory

#endif  // WASTE_DAEMON_MEMORY_USABLE_RAM_H_
