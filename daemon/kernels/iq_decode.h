// Decoding of the codebook types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S) one 32-element group at a time, into the form every
// kernel here uses: int8 codes and a weight scale per 16 elements, x =
// scale * code. Dequantization, the scalar reference dot and the AVX2 loop
// decode through these; the AVX-512 loop (matvec_avx512_iq.cc) takes whole
// blocks apart with vector ops, and the kernel tests hold it to these.
//
// The codes are exact: ggml's values are d * (small odd integer) / 8 (or
// / 4, / 1) * grid value * sign, each a product of few enough bits to be
// exact in f32; rewritten as scale * code with the same factors the products
// stay exact, so DequantizeRow equals ggml's dequantize_row_* to the bit.
// IQ1's values d * (2s + 1) * (grid + shift), shift = +-1/8, become
// (d * (2s + 1) / 8) * (8 grid + 8 shift), codes -9 .. 9.
//
// Each 8 codes are built in a 64-bit word from one codebook entry (one
// lookup per 8 values): signs flip bytes by SWAR (grid values are never 0
// where signs apply, so no carry crosses a byte).
//
// Compiled into translation units with different ISA flags: the inline
// namespace differs per flag set (as in fp16.h), so the linker never merges
// a copy built for AVX-512 into code that must run without it.
#ifndef WASTE_DAEMON_KERNELS_IQ_DECODE_H_
#define WASTE_DAEMON_KERNELS_IQ_DECODE_H_

#include <cstdint>
#include <cstring>

#include "daemon/kernels/fp16.h"
#include "daemon/kernels/iq_grids.h"
#include "daemon/kernels/quant_blocks.h"

#if defined(__AVX512F__)
#define WASTE_IQ_NS avx512
#elif defined(__AVX2__)
#define WASTE_IQ_NS avx2
#else
#define WASTE_IQ_NS portable
#endif

namespace waste::kernels {
inline namespace WASTE_IQ_NS {

// Group g of a block: element 8l + j is the int8 in byte j of q[l].
struct IqGroup {
  uint64_t q[4];
  float scale[2];  // Per 16 elements.
};

// Negates the bytes of `grid` (all in 1..127) whose bit is set in `signs`.
inline uint64_t WithSigns(uint64_t grid, uint8_t signs) {
  const uint64_t m = kIqSignBytes[signs];
  return (grid ^ m) + (m & 0x0101010101010101);
}

// IQ1: grid bytes -1, 0, 1 to 8 * grid + (negative ? -1 : 1).
inline uint64_t Iq1Codes(uint64_t grid, bool negative) {
  const uint64_t eight = (grid & 0x1F1F1F1F1F1F1F1F) << 3;  // Bytes 0xF8, 0, 8.
  if (!negative) return eight | 0x0101010101010101;
  // 8g - 1 == ~(-8g); -8g swaps 0xF8 and 0x08, which differ by 0xF0, in the
  // bytes where g != 0 (bit 0 set).
  return ~(eight ^ ((grid & 0x0101010101010101) * 0xF0));
}

inline void SetScales(IqGroup* r, float a, float b) {
  r->scale[0] = a;
  r->scale[1] = b;
}

// Per group g: bytes 8g .. 8g+3 are 4 indices into kIq2XxsGrid, the word at
// 8g + 4 holds four 7-bit sign indices (bits 7l ..) and the scale (bits 28-31).
inline IqGroup DecodeIq2Xxs(const uint8_t* block, int g) {
  const auto* b = reinterpret_cast<const BlockIQ2_XXS*>(block);
  const uint8_t* qs = reinterpret_cast<const uint8_t*>(b->qs) + 8 * g;
  const uint32_t aux = LoadU32(qs + 4);
  IqGroup r;
  for (int l = 0; l < 4; ++l)
    r.q[l] = WithSigns(kIq2XxsGrid[qs[l]], kIqSigns7[(aux >> (7 * l)) & 127]);
  const float s = F16ToF32(b->d) * static_cast<float>(2 * (aux >> 28) + 1) * 0.125f;
  SetScales(&r, s, s);
  return r;
}

// The scales of IQ2_XS and IQ2_S: two nibbles of scales[g], one per 16.
inline void SetIq2Scales(float d, uint8_t sc, IqGroup* r) {
  SetScales(r, d * static_cast<float>(2 * (sc & 0xF) + 1) * 0.125f,
            d * static_cast<float>(2 * (sc >> 4) + 1) * 0.125f);
}

// qs[4g + l]: bits 0-8 index kIq2XsGrid, bits 9-15 a sign index.
inline IqGroup DecodeIq2Xs(const uint8_t* block, int g) {
  const auto* b = reinterpret_cast<const BlockIQ2_XS*>(block);
  const uint8_t* qs = reinterpret_cast<const uint8_t*>(b->qs) + 8 * g;
  IqGroup r;
  for (int l = 0; l < 4; ++l) {
    const uint16_t v = LoadU16(qs + 2 * l);
    r.q[l] = WithSigns(kIq2XsGrid[v & 511], kIqSigns7[v >> 9]);
  }
  SetIq2Scales(F16ToF32(b->d), b->scales[g], &r);
  return r;
}

// Index l of group g: qs[4g + l] plus bits 2l, 2l+1 of qh[g] as bits 8-9;
// its signs the byte qs[32 + 4g + l].
inline IqGroup DecodeIq2S(const uint8_t* block, int g) {
  const auto* b = reinterpret_cast<const BlockIQ2_S*>(block);
  const uint8_t* qs = b->qs + 4 * g;
  const uint8_t* signs = b->qs + kQK_K / 8 + 4 * g;
  IqGroup r;
  for (int l = 0; l < 4; ++l) {
    const int index = qs[l] | ((b->qh[g] << (8 - 2 * l)) & 0x300);
    r.q[l] = WithSigns(kIq2SGrid[index], signs[l]);
  }
  SetIq2Scales(F16ToF32(b->d), b->scales[g], &r);
  return r;
}

// qs[8g + 2l], qs[8g + 2l + 1] index kIq3XxsGrid (4 values each); the word
// at qs[64 + 4g] holds four 7-bit sign indices and the scale (bits 28-31).
inline IqGroup DecodeIq3Xxs(const uint8_t* block, int g) {
  const auto* b = reinterpret_cast<const BlockIQ3_XXS*>(block);
  const uint8_t* qs = b->qs + 8 * g;
  const uint32_t aux = LoadU32(b->qs + kQK_K / 4 + 4 * g);
  IqGroup r;
  for (int l = 0; l < 4; ++l) {
    const uint64_t grid = kIq3XxsGrid[qs[2 * l]] | (uint64_t{kIq3XxsGrid[qs[2 * l + 1]]} << 32);
    r.q[l] = WithSigns(grid, kIqSigns7[(aux >> (7 * l)) & 127]);
  }
  const float s = F16ToF32(b->d) * static_cast<float>(2 * (aux >> 28) + 1) * 0.25f;
  SetScales(&r, s, s);
  return r;
}

// qs[8g + k] plus bit k of qh[g] as bit 8 index kIq3SGrid; signs[4g + l]
// are bytes; the scale is nibble g % 2 of scales[g / 2].
inline IqGroup DecodeIq3S(const uint8_t* block, int g) {
  const auto* b = reinterpret_cast<const BlockIQ3_S*>(block);
  const uint8_t* qs = b->qs + 8 * g;
  const int qh = b->qh[g];
  IqGroup r;
  for (int l = 0; l < 4; ++l) {
    const int i0 = qs[2 * l] | ((qh << (8 - 2 * l)) & 256);
    const int i1 = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
    r.q[l] = WithSigns(kIq3SGrid[i0] | (uint64_t{kIq3SGrid[i1]} << 32), b->signs[4 * g + l]);
  }
  const int sc = (b->scales[g / 2] >> (4 * (g % 2))) & 0xF;
  const float s = F16ToF32(b->d) * static_cast<float>(2 * sc + 1);
  SetScales(&r, s, s);
  return r;
}

// qs[4g + l] plus bits 3l .. 3l+2 of qh[g] as bits 8-10 index kIq1SGrid;
// qh[g] bits 12-14 are the scale, bit 15 the shift's sign (per group).
inline IqGroup DecodeIq1S(const uint8_t* block, int g) {
  const auto* b = reinterpret_cast<const BlockIQ1_S*>(block);
  const uint8_t* qs = b->qs + 4 * g;
  const uint16_t qh = LoadU16(reinterpret_cast<const uint8_t*>(b->qh) + 2 * g);
  IqGroup r;
  for (int l = 0; l < 4; ++l) {
    r.q[l] = Iq1Codes(kIq1SGrid[qs[l] | (((qh >> (3 * l)) & 7) << 8)], qh & 0x8000);
  }
  const float s = F16ToF32(b->d) * static_cast<float>(2 * ((qh >> 12) & 7) + 1) * 0.125f;
  SetScales(&r, s, s);
  return r;
}

// The f16 block scale of IQ1_M: the top nibbles of its 4 scale words.
inline float Iq1MScale(const BlockIQ1_M* b, uint16_t sc[4]) {
  for (int i = 0; i < 4; ++i) sc[i] = LoadU16(b->scales + 2 * i);
  const uint16_t h =
      (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000);
  return F16ToF32(h);
}

// qs[4g + l] plus a nibble of qh[2g + l / 2] (bits 0-2 for even l, 4-6 for
// odd) as bits 8-10 index kIq1SGrid; bit 3 of that nibble is the shift's
// sign. Scales: 3 bits each, per 16, from the scale words.
inline IqGroup DecodeIq1M(const uint8_t* block, int g) {
  const auto* b = reinterpret_cast<const BlockIQ1_M*>(block);
  uint16_t sc[4];
  const float d = Iq1MScale(b, sc);
  const uint8_t* qs = b->qs + 4 * g;
  const uint8_t* qh = b->qh + 2 * g;
  IqGroup r;
  for (int l = 0; l < 4; ++l) {
    const int nibble = (qh[l / 2] >> (4 * (l % 2))) & 0xF;
    r.q[l] = Iq1Codes(kIq1SGrid[qs[l] | ((nibble & 7) << 8)], nibble & 8);
  }
  const int word = sc[g / 2] >> (6 * (g % 2));
  SetScales(&r, d * static_cast<float>(2 * (word & 7) + 1) * 0.125f,
            d * static_cast<float>(2 * ((word >> 3) & 7) + 1) * 0.125f);
  return r;
}

// Group g (0..7) of the block at `block`, of a type IsGridType() accepts.
template <WeightType kType>
inline IqGroup DecodeIqGroup(const uint8_t* block, int g) {
  if constexpr (kType == WeightType::kIQ2_XXS) return DecodeIq2Xxs(block, g);
  if constexpr (kType == WeightType::kIQ2_XS) return DecodeIq2Xs(block, g);
  if constexpr (kType == WeightType::kIQ2_S) return DecodeIq2S(block, g);
  if constexpr (kType == WeightType::kIQ3_XXS) return DecodeIq3Xxs(block, g);
  if constexpr (kType == WeightType::kIQ3_S) return DecodeIq3S(block, g);
  if constexpr (kType == WeightType::kIQ1_S) return DecodeIq1S(block, g);
  if constexpr (kType == WeightType::kIQ1_M) return DecodeIq1M(block, g);
}

inline IqGroup DecodeIqGroup(WeightType type, const uint8_t* block, int g) {
  switch (type) {
    case WeightType::kIQ2_XXS:
      return DecodeIq2Xxs(block, g);
    case WeightType::kIQ2_XS:
      return DecodeIq2Xs(block, g);
    case WeightType::kIQ2_S:
      return DecodeIq2S(block, g);
    case WeightType::kIQ3_XXS:
      return DecodeIq3Xxs(block, g);
    case WeightType::kIQ3_S:
      return DecodeIq3S(block, g);
    case WeightType::kIQ1_S:
      return DecodeIq1S(block, g);
    default:
      return DecodeIq1M(block, g);
  }
}

}  // namespace WASTE_IQ_NS
}  // namespace waste::kernels

#undef WASTE_IQ_NS

#endif  // WASTE_DAEMON_KERNELS_IQ_DECODE_H_
