// The AVX2 loops of the codebook types (matvec_avx2_lowbit.cc),
// called from matvec_avx2.cc's row dispatch, and the AVX2 activation
// quantizers (matvec_avx2.cc, matmul_avx2_acts.cc). The translation units that define them
// are compiled with AVX2_COPTS; nothing here is inline, so the AVX-512 files may include it without
// taking AVX2-compiled copies of code. Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_

#include <cstdint>

#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels::internal::avx2 {

// Per block of 32 of x: d = max|x| / 127, qs = round(x * 127 / max|x|), and
// the block's s16 and s32 (the natural arrays of `out`; cols a multiple of
// 32). `block_sums`, if not null, gets each block's integer sum of qs
// ([cols / 32]). The one AVX2 activation quantizer: the plain and the tiled
// loops (matmul_avx2.cc) both start from it.
void QuantizeBlocks(const float* x, int64_t cols, const QuantizedActs& out, int32_t* block_sums);

// out[k] = dot(row, acts[k]) for k < NB, a row of `cols` (a multiple of 256)
// elements of a type IsGridType accepts.
template <int NB>
void DotLowBit(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
               float* out);

}  // namespace waste::kernels::internal::avx2

namespace waste::kernels::internal::avx2_tiled {

// The zero point the tiled loops fold into Q4_0's activation block sums (zs):
// its codes are q + 8. (MXFP4's is -kMxfp4CodeOffset.)
inline constexpr int kQ4_0ZeroPoint = -8;

// The activation of the tiled loops (matmul_avx2_acts.cc): the natural arrays
// as avx2::QuantizeBlocks makes them, then per unit qp, ds and zs in the lane
// order of `type`'s code vectors.
void QuantizeActsTiled(WeightType type, const float* x, int64_t cols, const QuantizedActs& out);

}  // namespace waste::kernels::internal::avx2_tiled

#endif  // WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
