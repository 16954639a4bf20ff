#include "daemon/kernels/ops/isa.h"

#include <cstdlib>
#include <cstring>

#include "common/logging.h"

namespace waste::kernels::ops {
namespace {

bool CpuHasAvx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

bool CpuHasAvx512() {
  return CpuHasAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

Isa DetectBest() {
  Isa best = CpuHasAvx512() ? Isa::kAvx512 : (CpuHasAvx2() ? Isa::kAvx2 : Isa::kScalar);
  const char* cap = std::getenv("WASTE_OPS_ISA");
  if (cap == nullptr) return best;
  Isa wanted = best;
  if (std::strcmp(cap, "scalar") == 0) {
    wanted = Isa::kScalar;
  } else if (std::strcmp(cap, "avx2") == 0) {
    wanted = Isa::kAvx2;
  } else if (std::strcmp(cap, "avx512") == 0) {
    wanted = Isa::kAvx512;
  } else {
    WLOG(WARNING) << "WASTE_OPS_ISA=" << cap << " is not one of scalar, avx2, avx512; using "
                  << IsaName(best);
  }
  return static_cast<int>(wanted) < static_cast<int>(best) ? wanted : best;
}

}  // namespace

bool IsaAvailable(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return CpuHasAvx2();
    case Isa::kAvx512:
      return CpuHasAvx512();
  }
  return false;
}

Isa BestIsa() {
  static const Isa best = DetectBest();
  return best;
}

std::vector<Isa> AvailableIsas() {
  std::vector<Isa> isas = {Isa::kScalar};
  if (IsaAvailable(Isa::kAvx2)) isas.push_back(Isa::kAvx2);
  if (IsaAvailable(Isa::kAvx512)) isas.push_back(Isa::kAvx512);
  return isas;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
      return "auto";
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

Isa ResolveIsa(Isa isa) {
  if (isa == Isa::kAuto) return BestIsa();
  WCHECK(IsaAvailable(isa)) << "this CPU cannot run ISA " << IsaName(isa);
  return isa;
}

}  // namespace waste::kernels::ops
