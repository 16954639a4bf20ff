// The AVX2 loops of the codebook types and of Q5_K and Q6_K
// (matvec_avx2_lowbit.cc), called from matvec_avx2.cc's row dispatch, and
// the AVX2 activation quantizers (matvec_avx2.cc, matmul_avx2_acts.cc). The
// translation units that define them are compiled with AVX2_COPTS, and again
// with AVXVNNI_COPTS into namespace avxvnni (avx2_variant.h); nothing here
// is inline but constants. Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_

#include <cstdint>

#include "daemon/kernels/avx2_variant.h"
#include "daemon/kernels/matvec_internal.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels::internal::WASTE_AVX2_NS {

// Per block of 32 of x: d = max|x| / 127, qs = round(x * 127 / max|x|), and
// the block's s16 and s32 (the natural arrays of `out`; cols a multiple of
// 32). `block_sums`, if not null, gets each block's integer sum of qs
// ([cols / 32]). The one AVX2 activation quantizer: the plain and the tiled
// loops (matmul_avx2.cc) both start from it.
void QuantizeBlocks(const float* x, int64_t cols, const QuantizedActs& out, int32_t* block_sums);

// out[k] = dot(row, acts[k]) for k < NB, a row of `cols` (a multiple of 256)
// elements of a codebook type, Q5_K or Q6_K.
template <int NB>
void DotLowBit(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
               float* out);

}  // namespace waste::kernels::internal::WASTE_AVX2_NS

namespace waste::kernels::internal::WASTE_AVX2_NS::tiled {

// The zero point the tiled loops fold into Q4_0's activation block sums (zs):
// its codes are q + 8.
inline constexpr int kQ4_0ZeroPoint = -8;

// What the tiled loops add to a table type's values to make them u8 codes
// (its zero point is minus that): MXFP4's kMxfp4CodeOffset; in the AVX-VNNI
// build IQ4_NL's and IQ4_XS's 128 too (without it they take a signed form,
// offset 0: a pair of their products + 128 would pass vpmaddubsw's int16).
constexpr int TableCodeOffset(WeightType type) {
  if (type == WeightType::kMXFP4) return kMxfp4CodeOffset;
#ifdef __AVXVNNI__
  if (type == WeightType::kIQ4_NL || type == WeightType::kIQ4_XS) return 128;
#endif
  return 0;
}

// The activation of the tiled loops (matmul_avx2_acts.cc): the natural arrays
// as QuantizeBlocks makes them, then per unit qp, ds and zs in the lane
// order of `type`'s code vectors.
void QuantizeActsTiled(WeightType type, const float* x, int64_t cols, const QuantizedActs& out);

}  // namespace waste::kernels::internal::WASTE_AVX2_NS::tiled

#endif  // WASTE_DAEMON_KERNELS_MATVEC_AVX2_INTERNAL_H_
