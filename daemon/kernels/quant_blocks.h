// Weight element types and the byte layouts of ggml's quantized blocks.
//
// The structs mirror llama.cpp's ggml/src/ggml-common.h exactly (field order,
// sizes, no padding) so that kernels can run on GGUF tensor bytes in place.
// Fields are little-endian as on every machine this daemon targets (x86-64).
// Block structs have alignment 1 or 2; tensor data in a GGUF file is aligned
// to 32 bytes but a row of blocks of odd size (Q4_0: 18 bytes) leaves later
// blocks unaligned, so kernels must use unaligned loads.
#ifndef WASTE_DAEMON_KERNELS_QUANT_BLOCKS_H_
#define WASTE_DAEMON_KERNELS_QUANT_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace waste::kernels {

// A block's unaligned little-endian fields (f16 scales, qh words, grid
// indices), for every ISA's loops and the reference code. Forced inline: a
// copy kept out of line would be one symbol that objects compiled for
// different ISAs share (see inlining_check.sh).
[[gnu::always_inline]] inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

[[gnu::always_inline]] inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

[[gnu::always_inline]] inline uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Element types the kernels understand. Numeric ids are ggml's (ggml.h,
// storage/ggml_types.h GgmlType), so a GGUF type id converts with a cast after
// IsSupportedWeightType() says yes.
enum class WeightType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kIQ1_M = 29,
  kBF16 = 30,
  kMXFP4 = 39,
};

// Every type above, for tests and benchmarks that iterate over all of them.
inline constexpr WeightType kAllWeightTypes[] = {
    WeightType::kF32,     WeightType::kF16,    WeightType::kBF16,   WeightType::kQ8_0,
    WeightType::kQ4_0,    WeightType::kQ4_1,   WeightType::kQ5_0,   WeightType::kQ5_1,
    WeightType::kQ2_K,    WeightType::kQ3_K,   WeightType::kQ4_K,   WeightType::kQ5_K,
    WeightType::kQ6_K,    WeightType::kIQ4_NL, WeightType::kIQ4_XS, WeightType::kIQ3_S,
    WeightType::kIQ3_XXS, WeightType::kIQ2_S,  WeightType::kIQ2_XS, WeightType::kIQ2_XXS,
    WeightType::kIQ1_M,   WeightType::kIQ1_S,  WeightType::kMXFP4,
};

// Elements per super-block of the K-quants.
inline constexpr int kQK_K = 256;
// Elements per block of the legacy quants (Q4_0 .. Q8_1).
inline constexpr int kQK32 = 32;

using Half = uint16_t;   // IEEE binary16 bits (ggml_half).
using BHalf = uint16_t;  // bfloat16 bits (ggml_bf16_t).

// x = d * (q - 8), q the 4-bit value; element j < 16 in the low nibble of
// qs[j], element j + 16 in its high nibble.
struct BlockQ4_0 {
  Half d;
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// x = d * q + m.
struct BlockQ4_1 {
  Half d;
  Half m;
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// x = d * (q - 16), q 5-bit: low 4 bits as Q4_0, bit 4 of element j is bit j
// of the little-endian uint32 qh.
struct BlockQ5_0 {
  Half d;
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// x = d * q + m, q 5-bit as in Q5_0.
struct BlockQ5_1 {
  Half d;
  Half m;
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// x = d * q, q int8.
struct BlockQ8_0 {
  Half d;
  int8_t qs[kQK32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], q 4-bit. Sub-block j
// of each 64-element half uses the low nibbles of qs[32*h .. 32*h+31] (j even)
// or their high nibbles (j odd). sc/m are 6-bit, packed in `scales` (see
// UnpackScaleMinK4 in dequantize.h).
struct BlockQ4_K {
  Half d;
  Half dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As Q4_K with a fifth bit: bit 4 of element 32*j + l is bit j of qh[l].
struct BlockQ5_K {
  Half d;
  Half dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16: x = d * scales[k] * (q - 32), q 6-bit: low 4 bits in
// ql, high 2 bits in qh. Each 128-element half h holds four rows of 32: for
// l < 32, element 128h + 32i + l has low bits in ql[64h + l + 32*(i&1)] (low
// nibble for i < 2, high nibble for i >= 2) and high bits (qh[32h + l] >> 2i) & 3.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  Half d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// 16 sub-blocks of 16: x = d * (scales[k] & 0xF) * q - dmin * (scales[k] >> 4),
// q 2-bit. Element 128n + 32j + l (n < 2, j < 4, l < 32) is bits 2j, 2j+1 of
// qs[32n + l]; it belongs to sub-block 8n + 2j + l / 16. So each 32-element
// group g = 4n + j is one shift of 32 consecutive qs bytes.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  Half d;
  Half dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16: x = d * (sc[k] - 32) * (q - 4), q 3-bit: its low 2 bits
// as Q2_K's q, its high bit for element 32g + l (group g < 8) bit g of
// hmask[l]. The 6-bit sc are packed in `scales` (see UnpackScaleQ3K in
// dequantize.h).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  Half d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl): a non-uniform
// grid, denser near zero, where weights cluster.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// x = d * kIq4NlValues[q], q 4-bit, nibbles placed as in Q4_0.
struct BlockIQ4_NL {
  Half d;
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// The E2M1 (1 sign, 2 exponent, 1 mantissa bit) values of MXFP4's 4-bit
// codes, doubled so that they are integers (ggml's kvalues_mxfp4): code c is
// (-1)^(c >> 3) * {0, 0.5, 1, 1.5, 2, 3, 4, 6}[c & 7], times 2.
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4 (OCP microscaling, gpt-oss): x = 2^(e - 128) * kMxfp4Values[q] (the
// E8M0 scale 2^(e - 127) halved to undo the doubling; E8M0HalfToF32 in
// fp16.h), q 4-bit, nibbles placed as in Q4_0.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockMXFP4) == 17);

// 8 groups of 32: x = d * (ls[g] - 32) * kIq4NlValues[q]. ls is 6-bit: low 4
// bits in nibble g % 2 of scales_l[g / 2], high 2 bits at bit 2g of
// scales_h. Group g's codes are qs[16g .. 16g + 15], nibbles as in Q4_0.
struct BlockIQ4_XS {
  Half d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The grid types (IQ1, IQ2, IQ3): each 8 (IQ3: 4) elements are one entry of
// a fixed codebook (daemon/kernels/iq_grids.h), with signs, times a scale
// per 32 or 16 elements. Bit layouts are spelled out where they are decoded,
// in iq_decode.h. All have 8 groups of 32 per block.

// x = d * (2s + 1) / 8 * sign * grid: per group g, qs[4g .. 4g+1] hold 4
// 8-bit grid indices (bytes 8g .. 8g+3) and a word of four 7-bit sign
// indices and the 4-bit scale s (bytes 8g+4 .. 8g+7).
struct BlockIQ2_XXS {
  Half d;
  uint16_t qs[kQK_K / 8];
};
static_assert(sizeof(BlockIQ2_XXS) == 66);

// qs[4g + l]: a 9-bit grid index and a 7-bit sign index; scales[g]: two
// 4-bit scales, one per 16 elements.
struct BlockIQ2_XS {
  Half d;
  uint16_t qs[kQK_K / 8];
  uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIQ2_XS) == 74);

// qs[0..31]: low 8 bits of 10-bit grid indices, qs[32..63]: sign bytes,
// qh[g]: the indices' top 2 bits, scales[g]: two 4-bit scales.
struct BlockIQ2_S {
  Half d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIQ2_S) == 82);

// qs[0..63]: 8-bit indices of 4-element grid entries; qs[64..95]: per group
// a word of four 7-bit sign indices and a 4-bit scale.
struct BlockIQ3_XXS {
  Half d;
  uint8_t qs[3 * kQK_K / 8];
};
static_assert(sizeof(BlockIQ3_XXS) == 98);

// qs: low 8 bits of 9-bit indices of 4-element grid entries, qh[g] their
// top bits, signs: sign bytes, scales: a 4-bit scale per group.
struct BlockIQ3_S {
  Half d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t signs[kQK_K / 8];
  uint8_t scales[kQK_K / 64];
};
static_assert(sizeof(BlockIQ3_S) == 110);

// Grid values -1, 0, 1 plus a shift of +-1/8: qs the low 8 bits of 11-bit
// indices; qh[g] their top 3 bits (x4), a 3-bit scale and the shift's sign.
struct BlockIQ1_S {
  Half d;
  uint8_t qs[kQK_K / 8];
  uint16_t qh[kQK_K / 32];
};
static_assert(sizeof(BlockIQ1_S) == 50);

// As IQ1_S with a shift sign per 8 elements and a 3-bit scale per 16; the
// f16 super-block scale is spread over the top nibbles of the scale words.
struct BlockIQ1_M {
  uint8_t qs[kQK_K / 8];
  uint8_t qh[kQK_K / 16];
  uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIQ1_M) == 56);

// Static facts about a type.
struct WeightTypeInfo {
  std::string_view name;  // As llama.cpp prints it: "Q4_K".
  int block_elems;        // Elements per block (1 for F32/F16/BF16).
  int block_bytes;        // Bytes per block.
};

constexpr bool IsSupportedWeightType(uint32_t id) {
  for (WeightType t : kAllWeightTypes) {
    if (static_cast<uint32_t>(t) == id) return true;
  }
  return false;
}

// Forced inline, as every helper the ISA libraries share: their translation
// units compile this header with their own -m flags, and of the out-of-line
// copies they would each keep the linker picks one for every caller, a
// scalar one included (see inlining_check.sh).
[[gnu::always_inline]] constexpr WeightTypeInfo GetWeightTypeInfo(WeightType type) {
  switch (type) {
    case WeightType::kF32:
      return {"F32", 1, 4};
    case WeightType::kF16:
      return {"F16", 1, 2};
    case WeightType::kBF16:
      return {"BF16", 1, 2};
    case WeightType::kQ8_0:
      return {"Q8_0", kQK32, sizeof(BlockQ8_0)};
    case WeightType::kQ4_0:
      return {"Q4_0", kQK32, sizeof(BlockQ4_0)};
    case WeightType::kQ4_1:
      return {"Q4_1", kQK32, sizeof(BlockQ4_1)};
    case WeightType::kQ5_0:
      return {"Q5_0", kQK32, sizeof(BlockQ5_0)};
    case WeightType::kQ5_1:
      return {"Q5_1", kQK32, sizeof(BlockQ5_1)};
    case WeightType::kQ2_K:
      return {"Q2_K", kQK_K, sizeof(BlockQ2_K)};
    case WeightType::kQ3_K:
      return {"Q3_K", kQK_K, sizeof(BlockQ3_K)};
    case WeightType::kQ4_K:
      return {"Q4_K", kQK_K, sizeof(BlockQ4_K)};
    case WeightType::kQ5_K:
      return {"Q5_K", kQK_K, sizeof(BlockQ5_K)};
    case WeightType::kQ6_K:
      return {"Q6_K", kQK_K, sizeof(BlockQ6_K)};
    case WeightType::kIQ4_NL:
      return {"IQ4_NL", kQK32, sizeof(BlockIQ4_NL)};
    case WeightType::kIQ4_XS:
      return {"IQ4_XS", kQK_K, sizeof(BlockIQ4_XS)};
    case WeightType::kMXFP4:
      return {"MXFP4", kQK32, sizeof(BlockMXFP4)};
    case WeightType::kIQ2_XXS:
      return {"IQ2_XXS", kQK_K, sizeof(BlockIQ2_XXS)};
    case WeightType::kIQ2_XS:
      return {"IQ2_XS", kQK_K, sizeof(BlockIQ2_XS)};
    case WeightType::kIQ2_S:
      return {"IQ2_S", kQK_K, sizeof(BlockIQ2_S)};
    case WeightType::kIQ3_XXS:
      return {"IQ3_XXS", kQK_K, sizeof(BlockIQ3_XXS)};
    case WeightType::kIQ3_S:
      return {"IQ3_S", kQK_K, sizeof(BlockIQ3_S)};
    case WeightType::kIQ1_S:
      return {"IQ1_S", kQK_K, sizeof(BlockIQ1_S)};
    case WeightType::kIQ1_M:
      return {"IQ1_M", kQK_K, sizeof(BlockIQ1_M)};
  }
  return {"?", 0, 0};
}

// Bytes of a row of `cols` elements; cols must be a multiple of block_elems.
[[gnu::always_inline]] constexpr int64_t RowBytes(WeightType type, int64_t cols) {
  const WeightTypeInfo info = GetWeightTypeInfo(type);
  return cols / info.block_elems * info.block_bytes;
}

// True for the codebook types (see BlockIQ2_XXS).
[[gnu::always_inline]] constexpr bool IsGridType(WeightType type) {
  switch (type) {
    case WeightType::kIQ2_XXS:
    case WeightType::kIQ2_XS:
    case WeightType::kIQ2_S:
    case WeightType::kIQ3_XXS:
    case WeightType::kIQ3_S:
    case WeightType::kIQ1_S:
    case WeightType::kIQ1_M:
      return true;
    default:
      return false;
  }
}

// True for the types whose dot products quantize the activation to int8.
[[gnu::always_inline]] constexpr bool UsesQuantizedActivations(WeightType type) {
  return GetWeightTypeInfo(type).block_elems > 1;
}

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_QUANT_BLOCKS_H_
