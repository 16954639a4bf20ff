#include "daemon/kernels/cpu_features.h"

#include <cstdlib>
#include <string>

namespace waste::kernels {
namespace {

// __builtin_cpu_supports also checks (through XGETBV) that the OS saves the
// wide registers, so a CPU flag alone cannot select a path that would fault.
Isa HardwareIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
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

}  // namespace

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
