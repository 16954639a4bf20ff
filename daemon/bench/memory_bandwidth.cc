#include "daemon/bench/memory_bandwidth.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "daemon/kernels/cpu_features.h"

namespace waste::bench {
namespace {

// Four independent accumulators so the loop is bound by loads, not by the
// add latency.
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint8_t* data, uint64_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  const __m256i* p = reinterpret_cast<const __m256i*>(data);
  const uint64_t n = bytes / 128;
  for (uint64_t i = 0; i < n; ++i, p += 4) {
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

}  // namespace waste::bench
