#include "daemon/bench/memory_bandwidth.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/matvec.h"

namespace waste::bench {
namespace {

// Four independent accumulators so the loop is bound by loads, not by the
// add latency.
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint8_t* data, uint64_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  const __m256i* p = reinterpret_cast<const __m256i*>(data);
  const uint64_t n = bytes / 128;
  for (uint64_t i = 0; i < n; ++i, p += 4) {
    // Two lines asked for ahead, at the distance and with the hint the
    // decode kernels use (PrefetchAhead): without, one core keeps too few
    // lines in flight to read what the kernels read.
    if constexpr (kernels::kPrefetchBytes > 0) {
      _mm_prefetch(reinterpret_cast<const char*>(p) + kernels::kPrefetchBytes, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p) + kernels::kPrefetchBytes + 64, _MM_HINT_T0);
    }
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(p));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(p + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(p + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(p + 3));
  }
  __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  uint64_t lanes[4];
  std::memcpy(lanes, &s, sizeof(lanes));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace

absl::StatusOr<double> MeasureMemoryReadGbps(uint64_t bytes, int threads, int passes) {
  threads = std::max(1, threads);
  const uint64_t per_thread = (bytes / threads) / 4096 * 4096;
  const uint64_t total = per_thread * threads;
  void* raw = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", total, " bytes to measure memory bandwidth"));
  }
  uint8_t* buffer = static_cast<uint8_t*>(raw);
  // Huge pages where the kernel allows, as the pool the weights live in has.
  madvise(raw, total, MADV_HUGEPAGE);
  std::memset(buffer, 1, total);  // Fault every page in before timing.
  double best = 0;
  volatile uint64_t sink = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<uint64_t> sums(threads);
    absl::Time start = absl::Now();
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; ++t) {
      workers.emplace_back([&, t] { sums[t] = SumAvx2(buffer + t * per_thread, per_thread); });
    }
    sums[0] = SumAvx2(buffer, per_thread);
    for (std::thread& w : workers) w.join();
    double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    for (uint64_t s : sums) sink = sink + s;
    best = std::max(best, total / seconds / 1e9);
  }
  munmap(raw, total);
  return best;
}

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!absl::StartsWith(line, "model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const absl::string_view name =
        absl::StripAsciiWhitespace(absl::string_view(line).substr(colon + 1));
    if (!name.empty()) return std::string(name);
    break;
  }
  return "unknown CPU";
}

std::string MachineSummary(int threads) {
  return absl::StrCat(CpuModelName(), ", ", std::string(kernels::IsaName(kernels::DetectIsa())),
                      " kernels, ", threads, threads == 1 ? " thread" : " threads",
                      kernels::MatrixUnitAvailable() ? ", AMX for prompt tokens" : "");
}

std::optional<HostCpuTimes> ParseHostCpuTimes(absl::string_view proc_stat) {
  const absl::string_view line = proc_stat.substr(0, proc_stat.find('\n'));
  const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
  // "cpu", then user nice system idle iowait irq softirq steal; guest and
  // guest_nice, where present, are already counted in user and nice.
  constexpr size_t kSteal = 8;
  if (fields.size() <= kSteal || fields[0] != "cpu") return std::nullopt;
  HostCpuTimes t;
  for (size_t i = 1; i <= kSteal; ++i) {
    uint64_t ticks = 0;
    if (!absl::SimpleAtoi(fields[i], &ticks)) return std::nullopt;
    t.total += ticks;
    if (i == kSteal) t.steal = ticks;
  }
  return t;
}

std::optional<HostCpuTimes> ReadHostCpuTimes() {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return ParseHostCpuTimes(text.str());
}

std::optional<double> StealShare(const std::optional<HostCpuTimes>& before,
                                 const std::optional<HostCpuTimes>& after) {
  if (!before || !after || after->total <= before->total || after->steal < before->steal) {
    return std::nullopt;
  }
  return static_cast<double>(after->steal - before->steal) /
         static_cast<double>(after->total - before->total);
}

}  // namespace waste::bench
