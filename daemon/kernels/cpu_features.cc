#include "daemon/kernels/cpu_features.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
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
Isa HardwareIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bitalg") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return Isa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return Isa::kAvx2;
  }
  return Isa::kScalar;
}

Isa ComputeIsa() {
  Isa isa = HardwareIsa();
  if (const char* cap = std::getenv("WASTE_KERNELS_ISA")) {
    const std::string s(cap);
    Isa want = isa;
    if (s == "scalar") want = Isa::kScalar;
    if (s == "avx2") want = Isa::kAvx2;
    if (s == "avx512") want = Isa::kAvx512;
    if (static_cast<int>(want) < static_cast<int>(isa)) isa = want;
  }
  return isa;
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
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

Isa DetectIsa() {
  static const Isa isa = ComputeIsa();
  return isa;
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  const int best = static_cast<int>(HardwareIsa());
  for (int i = 0; i <= best; ++i) out.push_back(static_cast<Isa>(i));
  return out;
}

}  // namespace waste::kernels
