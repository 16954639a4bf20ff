#include "common/logging.h"
#include "daemon/kernels/ops/fp16.h"
#include "daemon/kernels/ops/kernels_internal.h"

namespace waste::kernels::ops {
namespace internal {

const Kernels& KernelsFor(Isa isa) {
  switch (ResolveIsa(isa)) {
    case Isa::kAvx512:
      return Avx512Kernels();
    case Isa::kAvx2:
      return Avx2Kernels();
    default:
      return ScalarKernels();
  }
}

}  // namespace internal

void HalfToFloatRow(const Half* src, int64_t n, float* dst, Isa isa) {
  WCHECK(n >= 0) << "HalfToFloatRow n=" << n;
  if (n == 0) return;
  internal::KernelsFor(isa).half_to_float(src, n, dst);
}

void FloatToHalfRow(const float* src, int64_t n, Half* dst, Isa isa) {
  WCHECK(n >= 0) << "FloatToHalfRow n=" << n;
  if (n == 0) return;
  internal::KernelsFor(isa).float_to_half(src, n, dst);
}

}  // namespace waste::kernels::ops
