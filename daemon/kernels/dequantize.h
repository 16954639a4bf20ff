// Scalar reference dequantization: any supported weight type -> f32.
//
// This is the oracle of the kernel tests: obviously correct loops that follow
// llama.cpp's dequantize_row_* element for element. Not for the hot path.
#ifndef WASTE_DAEMON_KERNELS_DEQUANTIZE_H_
#define WASTE_DAEMON_KERNELS_DEQUANTIZE_H_

#include <cstdint>

#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels {

// Writes `n` floats decoded from `src` (a row of `type`) to `dst`. `n` must be
// a multiple of the type's block size (CHECKed).
void DequantizeRow(WeightType type, const void* src, float* dst, int64_t n);

// Decodes sub-block j (0..7) scale and min of a Q4_K/Q5_K `scales` array: for
// j < 4 the low 6 bits of bytes j and j+4; for j >= 4 a nibble of byte j+4
// plus the top 2 bits of bytes j-4 (scale) and j (min).
inline void UnpackScaleMinK4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Decodes sub-block k (0..15) scale of a Q3_K `scales` array, as the signed
// value -32..31 that multiplies d: its low 4 bits are nibble k / 8 of byte
// k % 8, its high 2 bits bits 2 * (k / 4) of byte 8 + k % 4.
inline int UnpackScaleQ3K(int k, const uint8_t* scales) {
  const int low = (scales[k % 8] >> (4 * (k / 8))) & 0xF;
  const int high = (scales[8 + k % 4] >> (2 * (k / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Group g's (0..7) scale of an IQ4_XS block as the signed value -32..31
// that multiplies d.
inline int UnpackScaleIQ4XS(int g, const BlockIQ4_XS& b) {
  const int low = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0xF;
  const int high = (b.scales_h >> (2 * g)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_DEQUANTIZE_H_
