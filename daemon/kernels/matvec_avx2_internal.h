// The AVX2 loops of the codebook types (matvec_avx2_lowbit.cc), called from
// matvec_avx2.cc's row dispatch and for IQ1_S from the AVX-512 one. Both
// translation units are compiled with AVX2_COPTS. Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_

#include <cstdint>

#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels::internal::avx2 {

// out[k] = dot(row, acts[k]) for k < NB, a row of `cols` (a multiple of 256)
// elements of a type IsGridType accepts.
template <int NB>
void DotLowBit(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
               float* out);

}  // namespace waste::kernels::internal::avx2

#endif  // WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
