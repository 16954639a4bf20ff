// The AVX2 loops of the codebook types and IQ4_XS (matvec_avx2_lowbit.cc),
// called from matvec_avx2.cc's row dispatch (compiled with AVX2_COPTS too).
// Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_

#include <cstdint>

#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels::internal::avx2 {

// out[k] = dot(row, acts[k]) for k < NB, a row of `cols` (a multiple of 256)
// elements of a type IsGridType accepts, or IQ4_XS.
template <int NB>
void DotLowBit(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
               float* out);

}  // namespace waste::kernels::internal::avx2

#endif  // WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
