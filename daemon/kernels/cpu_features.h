// Which instruction-set level of the kernels this CPU can run.
#ifndef WASTE_DAEMON_KERNELS_CPU_FEATURES_H_
#define WASTE_DAEMON_KERNELS_CPU_FEATURES_H_

#include <string_view>
#include <vector>

namespace waste::kernels {

// Kernel families, each a superset of the one before on real CPUs.
//  kAvx2:   AVX2 + FMA + F16C (Haswell, Zen 1 and later).
//  kAvx512: AVX-512 F/BW/VL/VNNI/VBMI (Ice Lake, Zen 4 and later).
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

std::string_view IsaName(Isa isa);

// The best family this CPU and OS support (checked once, then cached).
// WASTE_KERNELS_ISA=scalar|avx2|avx512 in the environment caps it, for
// comparing paths on one machine.
Isa DetectIsa();

// Every family this machine can run, kScalar first; tests run each.
std::vector<Isa> SupportedIsas();

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_CPU_FEATURES_H_
