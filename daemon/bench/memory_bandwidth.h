// This machine's memory read bandwidth, measured the way decode reads
// weights: threads summing disjoint halves of a buffer much larger than the
// caches with 256-bit loads. `wasted bench` measures it in the same run as
// its decode figures so results read as ratios, and names the CPU beside
// them (figures from different machines are not comparable).
#ifndef WASTE_DAEMON_BENCH_MEMORY_BANDWIDTH_H_
#define WASTE_DAEMON_BENCH_MEMORY_BANDWIDTH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

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

}  // namespace waste::bench

#endif  // WASTE_DAEMON_BENCH_MEMORY_BANDWIDTH_H_
