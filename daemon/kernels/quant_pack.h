// Packing of integer codes into ggml's block fields, shared by the plain
// (quantize.cc) and the importance-weighted (quantize_weighted.cc)
// quantizers: the search differs, the bytes a code set makes do not.
// Internal to daemon/kernels' :quant.
#ifndef WASTE_DAEMON_KERNELS_QUANT_PACK_H_
#define WASTE_DAEMON_KERNELS_QUANT_PACK_H_

#include <cstdint>
#include <cstring>

#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels::internal {

// 32 4-bit codes as Q4_0 places them (also IQ4_NL, MXFP4, and each IQ4_XS
// group): code j < 16 in the low nibble of qs[j], code j + 16 in its high one.
inline void PackNibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

// 32 5-bit codes as Q5_0/Q5_1 place them: the low 4 bits as PackNibbles, bit
// 4 of code j as bit j of the little-endian word qh.
inline void PackFiveBits(const int* q, uint8_t* qh, uint8_t* qs) {
  uint32_t high = 0;
  for (int j = 0; j < kQK32; ++j) high |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &high, 4);
  for (int j = 0; j < 16; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
}

// 256 4-bit codes as Q4_K/Q5_K place them: groups 2p and 2p + 1 in the low
// and high nibbles of qs[32p .. 32p + 31] (only the low 4 bits of each code).
template <typename Code>
inline void PackKNibbles(const Code* q, uint8_t* qs) {
  for (int pair = 0; pair < 4; ++pair) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * pair + l] =
          static_cast<uint8_t>((q[64 * pair + l] & 0xF) | ((q[64 * pair + 32 + l] & 0xF) << 4));
    }
  }
}

}  // namespace waste::kernels::internal

#endif  // WASTE_DAEMON_KERNELS_QUANT_PACK_H_
