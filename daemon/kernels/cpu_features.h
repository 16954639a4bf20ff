// Which instruction-set level of the kernels this CPU can run, and how many
// cores it has for them.
#ifndef WASTE_DAEMON_KERNELS_CPU_FEATURES_H_
#define WASTE_DAEMON_KERNELS_CPU_FEATURES_H_

#include <string>
#include <string_view>
#include <vector>

namespace waste::kernels {

// Kernel families, each a superset of the one before on real CPUs.
//  kAvx2:   AVX2 + FMA + F16C (Haswell, Zen 1 and later).
//  kAvx512: AVX-512 F/BW/VL/VNNI/VBMI/BITALG (Ice Lake, Zen 4 and later:
//           every CPU with VNNI and VBMI has BITALG too).
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

std::string_view IsaName(Isa isa);

// The best family this CPU and OS support (checked once, then cached).
// WASTE_KERNELS_ISA=scalar|avx2|avx512 in the environment caps it, for
// comparing paths on one machine.
Isa DetectIsa();

// Every family this machine can run, kScalar first; tests run each.
std::vector<Isa> SupportedIsas();

// The number of physical cores this process may run on: distinct (package,
// die, core) ids among the CPUs in its affinity mask (sched_getaffinity), read
// from /sys/devices/system/cpu/cpuN/topology. SMT siblings share one core's
// execution units, and matvec is bound by them or by memory, so a second
// thread per core adds little and, once it is descheduled, costs. Falls back
// to the mask's size, then to std::thread::hardware_concurrency(), where the
// topology is unreadable. Always >= 1. Not cached: the mask can change.
int PhysicalCores();

// PhysicalCores' count for `cpus` with the topology under `cpu_dir` (normally
// /sys/devices/system/cpu); 0 if any of them has no readable topology.
int CountPhysicalCores(const std::string& cpu_dir, const std::vector<int>& cpus);

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_CPU_FEATURES_H_
