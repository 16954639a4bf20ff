#include "daemon/kernels/cpu_features.h"

#include <cpuid.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <tuple>

namespace waste::kernels {
namespace {

// __builtin_cpu_supports also checks (through XGETBV) that the OS saves the
// wide registers, so a CPU flag alone cannot select a path that would fault.
bool HardwareRuns(Isa isa) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return avx2;
    case Isa::kAvxVnni:
      return avx2 && __builtin_cpu_supports("avxvnni");
    case Isa::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
             __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bitalg");
  }
  return false;
}

constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512};

Isa ComputeIsa() {
  Isa cap = Isa::kAvx512;
  if (const char* env = std::getenv("WASTE_KERNELS_ISA")) {
    const std::string s(env);
    for (Isa isa : kAllIsas) {
      if (s == IsaName(isa)) cap = isa;
    }
  }
  Isa best = Isa::kScalar;
  for (Isa isa : SupportedIsas()) {
    if (static_cast<int>(isa) <= static_cast<int>(cap)) best = isa;
  }
  return best;
}

CodebookReads CodebookReadsFromEnv() {
  const char* env = std::getenv("WASTE_KERNELS_GATHER");
  if (env == nullptr) return CodebookReads::kAuto;
  const std::string s(env);
  if (s == "1") return CodebookReads::kGather;
  if (s == "0") return CodebookReads::kScalar;
  return CodebookReads::kAuto;
}

std::atomic<CodebookReads>& CodebookReadsVar() {
  static std::atomic<CodebookReads> reads{CodebookReadsFromEnv()};
  return reads;
}

// Reads one integer from a sysfs file; false if it cannot.
bool ReadInt(const std::string& path, long* out) {
  std::ifstream in(path);
  return static_cast<bool>(in >> *out);
}

// The CPUs this process may run on, or empty if the kernel will not say.
std::vector<int> AllowedCpus() {
  // The mask must be at least the kernel's size for it; grow until it is.
  for (int size = 1024; size <= (1 << 20); size *= 2) {
    cpu_set_t* set = CPU_ALLOC(size);
    if (set == nullptr) return {};
    const size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0) {
      std::vector<int> cpus;
      for (int cpu = 0; cpu < size; ++cpu) {
        if (CPU_ISSET_S(cpu, bytes, set)) cpus.push_back(cpu);
      }
      CPU_FREE(set);
      return cpus;
    }
    CPU_FREE(set);
    if (errno != EINVAL) return {};
  }
  return {};
}

}  // namespace

int CountPhysicalCores(const std::string& cpu_dir, const std::vector<int>& cpus) {
  std::set<std::tuple<long, long, long>> cores;
  for (int cpu : cpus) {
    const std::string topology = cpu_dir + "/cpu" + std::to_string(cpu) + "/topology/";
    long package = 0;
    long die = 0;
    long core = 0;
    if (!ReadInt(topology + "physical_package_id", &package) ||
        !ReadInt(topology + "core_id", &core)) {
      return 0;
    }
    // core_id is unique within a die; die_id (Linux >= 5.3) within a package.
    if (!ReadInt(topology + "die_id", &die)) die = 0;
    cores.emplace(package, die, core);
  }
  return static_cast<int>(cores.size());
}

int PhysicalCores() {
  const std::vector<int> cpus = AllowedCpus();
  if (!cpus.empty()) {
    const int cores = CountPhysicalCores("/sys/devices/system/cpu", cpus);
    if (cores > 0) return cores;
    return static_cast<int>(cpus.size());
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvxVnni:
      return "avxvnni";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

Isa DetectIsa() {
  static const Isa isa = ComputeIsa();
  return isa;
}

const std::vector<Isa>& SupportedIsas() {
  static const std::vector<Isa> isas = [] {
    std::vector<Isa> out;
    for (Isa isa : kAllIsas) {
      if (HardwareRuns(isa)) out.push_back(isa);
    }
    return out;
  }();
  return isas;
}

bool MatrixUnitAvailable() {
  static const bool available = [] {
    if (const char* env = std::getenv("WASTE_KERNELS_AMX"); env != nullptr && env[0] == '0') {
      return false;
    }
    if (DetectIsa() != Isa::kAvx512) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    constexpr unsigned kAmxTile = 1u << 24, kAmxInt8 = 1u << 25;
    if ((edx & kAmxTile) == 0 || (edx & kAmxInt8) == 0) return false;
    // The tile data (XSTATE component 18) is off until asked for; a kernel
    // without the request (before 5.16) or a hypervisor that hides it says no.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureTileData = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) == 0;
  }();
  return available;
}

bool IsaSupported(Isa isa) {
  const std::vector<Isa>& isas = SupportedIsas();
  return std::find(isas.begin(), isas.end(), isa) != isas.end();
}

CodebookReads CodebookReadsSetting() { return CodebookReadsVar().load(std::memory_order_relaxed); }

void SetCodebookReads(CodebookReads reads) {
  CodebookReadsVar().store(reads, std::memory_order_relaxed);
}

bool CodebookGatherChoice::Gathers() {
  const CodebookReads setting = CodebookReadsSetting();
  if (setting != CodebookReads::kAuto) return setting == CodebookReads::kGather;
  std::call_once(measured_, [this] {
    int64_t best[2] = {INT64_MAX, INT64_MAX};
    for (int pass = 0; pass < 5; ++pass) {
      for (int gather = 0; gather < 2; ++gather) {
        const auto start = std::chrono::steady_clock::now();
        read_(gather != 0);
        const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count();
        best[gather] = std::min(best[gather], ns);
      }
    }
    faster_ = best[1] * 10 < best[0] * 9;
  });
  return faster_;
}

void ProbeIndices(uint16_t* out, int count, int bits) {
  uint32_t x = 12345;
  for (int i = 0; i < count; ++i) {
    x = x * 1664525 + 1013904223;
    out[i] = static_cast<uint16_t>(x >> (32 - bits));
  }
}

}  // namespace waste::kernels
