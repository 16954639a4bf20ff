// The AVX2 loops of the 1-3 bit types (Q2_K, Q3_K and the codebook types,
// matvec_avx2_lowbit.cc), called from matvec_avx2.cc's row dispatch. Both
// translation units are compiled with AVX2_COPTS. Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_

#include <cstdint>

#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels::internal::avx2 {

// True for the types DotLowBit computes.
constexpr bool IsLowBitType(WeightType type) {
  return type == WeightType::kQ2_K || type == WeightType::kQ3_K || IsGridType(type);
}

// out[k] = dot(row, acts[k]) for k < NB, a row of `cols` (a multiple of 256)
// elements of a type IsLowBitType accepts.
template <int NB>
void DotLowBit(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
               float* out);

}  // namespace waste::kernels::internal::avx2

#endif  // WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
