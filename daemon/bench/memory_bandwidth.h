// This machine's memory read bandwidth, measured the way decode reads
// weights: threads summing disjoint halves of a buffer much larger than the
// caches with 256-bit loads. `wasted bench` measures it in the same run as
// its decode figures so results read as ratios, and names the CPU beside
// them (figures from different machines are not comparable).
#ifndef WASTE_DAEMON_BENCH_MEMORY_BANDWIDTH_H_
#define WASTE_DAEMON_BENCH_MEMORY_BANDWIDTH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace waste::bench {

// Best of `passes` passes over `bytes` (rounded to 4 KiB) with `threads`
// threads, in GB/s (1e9). The buffer is mapped, touched, measured and
// unmapped before returning. RESOURCE_EXHAUSTED when it cannot be mapped.
absl::StatusOr<double> MeasureMemoryReadGbps(uint64_t bytes, int threads, int passes = 3);

// The CPU's model name as /proc/cpuinfo gives it ("AMD EPYC 9B45"), or
// "unknown CPU" where it cannot be read.
std::string CpuModelName();

// What a benchmark's figures came from: "AMD EPYC 9B45, avx512 kernels, 2
// threads" (the kernels' ISA as DetectIsa picks it).
std::string MachineSummary(int threads);

// The whole machine's CPU time as the first line of /proc/stat counts it
// (all CPUs, in clock ticks): every state, and the ticks the hypervisor ran
// something else while a vCPU had work ("steal"). On a shared virtual
// machine steal slows a run without showing in its own CPU time, so a
// benchmark says how much of it there was beside its figures.
struct HostCpuTimes {
  uint64_t total = 0;
  uint64_t steal = 0;
};

// Parses /proc/stat text ("cpu  user nice system idle iowait irq softirq
// steal ..."); nullopt unless its first line is the "cpu" line with at
// least those eight counts (kernels before 2.6.11 have no steal count).
std::optional<HostCpuTimes> ParseHostCpuTimes(absl::string_view proc_stat);

// ParseHostCpuTimes of this machine's /proc/stat; nullopt where it cannot
// be read.
std::optional<HostCpuTimes> ReadHostCpuTimes();

// The share of the machine's CPU time (0 to 1) that went to steal between
// two readings; nullopt when either is missing or no tick passed.
std::optional<double> StealShare(const std::optional<HostCpuTimes>& before,
                                 const std::optional<HostCpuTimes>& after);

}  // namespace waste::bench

#endif  // WASTE_DAEMON_BENCH_MEMORY_BANDWIDTH_H_
