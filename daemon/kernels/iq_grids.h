// The codebooks of ggml's IQ1, IQ2 and IQ3 types (ggml-common.h, llama.cpp
// c392e509): each entry packs 8 (IQ3: 4) unsigned grid values, one per byte,
// element j in byte j. They are data the files were quantized against, so
// they must match ggml's bit for bit; iq_grids_*.cc hold them, reproduced
// from ggml-common.h. IQ1's values are int8 -1, 0, 1.
#ifndef WASTE_DAEMON_KERNELS_IQ_GRIDS_H_
#define WASTE_DAEMON_KERNELS_IQ_GRIDS_H_

#include <array>
#include <cstdint>

namespace waste::kernels {

extern const uint64_t kIq2XxsGrid[256];  // Values 8, 25, 43.
extern const uint64_t kIq2XsGrid[512];   // Values 8, 25, 43.
extern const uint64_t kIq2SGrid[1024];   // Values 8, 25, 43.
extern const uint32_t kIq3XxsGrid[256];  // Values 4, 12, ..., 52, 62.
extern const uint32_t kIq3SGrid[512];    // Values 1, 3, ..., 15.
extern const uint64_t kIq1SGrid[2048];   // Values -1, 0, 1 (int8).

// kIq1SGrid with each value g as the byte mult g + add: the kernels' IQ1
// codes (AVX-512: 8g + 1 + 128, before the shift's sign is applied per
// piece; AVX2: g + 1, unsigned).
std::array<uint64_t, 2048> Iq1ByteTable(int mult, int add);

// IQ2_XXS, IQ2_XS and IQ3_XXS store 7 sign bits per 8 elements; the eighth
// makes the count of negative elements even (ggml's ksigns_iq2xs).
inline constexpr std::array<uint8_t, 128> kIqSigns7 = [] {
  std::array<uint8_t, 128> t{};
  for (int i = 0; i < 128; ++i) {
    int ones = 0;
    for (int b = 0; b < 7; ++b) ones += (i >> b) & 1;
    t[i] = static_cast<uint8_t>(i | ((ones & 1) << 7));
  }
  return t;
}();

// A sign byte (bit j: element j negative) as a mask of 0xFF bytes.
inline constexpr std::array<uint64_t, 256> kIqSignBytes = [] {
  std::array<uint64_t, 256> t{};
  for (int i = 0; i < 256; ++i) {
    for (int j = 0; j < 8; ++j) {
      if ((i >> j) & 1) t[i] |= uint64_t{0xFF} << (8 * j);
    }
  }
  return t;
}();

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_IQ_GRIDS_H_
