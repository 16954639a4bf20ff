// The codebook types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
// on AVX-512: a decoder per type fills a Unit for DotQuantized
// (matvec_avx512_internal.h). The bit layouts are the ones iq_decode.h
// spells out per group; here a whole block is taken apart at once:
//   - the 32 codebook indices (64 for IQ3's 4-value entries) are assembled
//     in int32 lanes and fetched with 4 gathers (one zmm of codes each);
//   - sign bytes, one per 8 elements, are 64-bit masks per zmm (bit 8p + j:
//     element j of piece p), applied with one masked subtract; the 7-bit
//     sign indices of IQ2_XXS, IQ2_XS and IQ3_XXS become sign bytes through
//     one vpermi2b on kIqSigns7; bit fields come out of their words with
//     vpmultishiftqb or variable shifts;
//   - IQ1's grid values g (-1, 0, 1) become 8g +- 1 with a shift and an add.
// Codes are int8 + 128 for vpdpbusd, with a scale per 16 elements, so the
// loop is Q6_K's (natural order, kSumScale -128 folds the +128 back out).
#include <immintrin.h>

#include <array>
#include <cstdint>

#include "daemon/kernels/fp16.h"
#include "daemon/kernels/iq_grids.h"
#include "daemon/kernels/matvec_avx512_internal.h"

namespace waste::kernels::internal::avx512 {
namespace {

inline uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// What the codebook decoders share.
template <WeightType kType>
struct GridDecoder {
  static constexpr int kUnitBytes = GetWeightTypeInfo(kType).block_bytes;
  static constexpr ActOrder kOrder = ActOrder::kNatural;
  static constexpr int kLaneVecs = 4;
  static constexpr bool kPer16 = true;
  static constexpr float kSumScale = -128;
  static constexpr SlotTable kSlots = kPer16Slots;
};

// Bytes 8g .. 8g+3 of each 64-bit lane g, in order (pieces 4g + l).
alignas(64) constexpr std::array<uint8_t, 64> kFirst4OfEachQword = [] {
  std::array<uint8_t, 64> t{};
  for (int i = 0; i < 32; ++i) t[i] = static_cast<uint8_t>(8 * (i / 4) + i % 4);
  return t;
}();

// 7-bit sign indices (low 7 bits of each byte) to sign bytes.
inline __m512i SignBytes7(__m512i idx7) {
  return _mm512_permutex2var_epi8(_mm512_loadu_si512(kIqSigns7.data()), idx7,
                                  _mm512_loadu_si512(kIqSigns7.data() + 64));
}

// Codes for vpdpbusd: grid values negated where `negative` has a bit, + 128.
inline __m512i SignedCodes(__m512i grid, uint64_t negative) {
  const __m512i v =
      _mm512_mask_sub_epi8(grid, _cvtu64_mask64(negative), _mm512_setzero_si512(), grid);
  return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
}

// IQ1: grid bytes g (-1, 0, 1) to 8g + delta (delta bytes +-1), + 128.
inline __m512i Iq1Codes(__m512i grid, __m512i delta) {
  const __m512i eight =
      _mm512_and_si512(_mm512_slli_epi16(grid, 3), _mm512_set1_epi8(static_cast<char>(0xF8)));
  return _mm512_xor_si512(_mm512_add_epi8(eight, delta), _mm512_set1_epi8(static_cast<char>(0x80)));
}

// +-1 bytes, -1 in the pieces (8 bytes each) whose bit is set in `negative`.
inline __m512i Iq1Delta(__mmask8 negative) {
  return _mm512_or_si512(_mm512_movm_epi64(negative), _mm512_set1_epi8(1));
}

// The int32 indices of pieces 8z .. 8z+7 out of two zmm of 16.
inline __m256i Pieces8(const __m512i idx[2], int z) {
  return z % 2 ? _mm512_extracti64x4_epi64(idx[z / 2], 1) : _mm512_castsi512_si256(idx[z / 2]);
}

// (2s + 1) * mult for 8 or 16 small integer scale codes s.
inline __m256 OddScales8(__m256i s, float mult) {
  return _mm256_mul_ps(
      _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(s, 1), _mm256_set1_epi32(1))),
      _mm256_set1_ps(mult));
}
inline __m512 OddScales16(__m512i s, float mult) {
  return _mm512_mul_ps(
      _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(1))),
      _mm512_set1_ps(mult));
}

// IQ2_XS / IQ2_S scales: the two nibbles of 8 bytes, one per 16 elements.
inline __m512 Iq2Scales(const uint8_t* scales, float d) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i s =
      _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
  return OddScales16(_mm512_cvtepu8_epi32(s), d * 0.125f);
}

// Per group (one 64-bit lane: 4 index bytes, then a word of four 7-bit sign
// indices and the scale in bits 28-31).
struct Iq2Xxs : GridDecoder<WeightType::kIQ2_XXS> {
  static void Load(const uint8_t* p, Unit* u) {
    const float d = F16ToF32(LoadU16(p));
    const __m512i q = _mm512_loadu_si512(p + 2);
    const __m512i first4 = _mm512_load_si512(kFirst4OfEachQword.data());
    const __m512i idx8 = _mm512_permutexvar_epi8(first4, q);
    // Bytes 0-3 of each lane: bits 32 + 7l ..; byte 4: bits 60 .. (the scale).
    const __m512i fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x3C352E2720), q);
    const __m512i s7 =
        _mm512_and_si512(_mm512_permutexvar_epi8(first4, fields), _mm512_set1_epi8(0x7F));
    alignas(64) uint64_t signs[8];
    _mm512_store_si512(signs, SignBytes7(s7));
    const __m512i idx[2] = {_mm512_cvtepu8_epi32(_mm512_castsi512_si128(idx8)),
                            _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(idx8, 1))};
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      u->codes[z] = SignedCodes(_mm512_i32gather_epi64(Pieces8(idx, z), kIq2XxsGrid, 8), signs[z]);
    }
    const __m256i sc = _mm512_cvtepi64_epi32(
        _mm512_and_si512(_mm512_srli_epi64(fields, 32), _mm512_set1_epi64(0xF)));
    u->wsc = Dup8To16(OddScales8(sc, d * 0.125f));
  }
};

// qs[i]: 9-bit index, 7-bit sign index above it.
struct Iq2Xs : GridDecoder<WeightType::kIQ2_XS> {
  static void Load(const uint8_t* p, Unit* u) {
    const float d = F16ToF32(LoadU16(p));
    const __m512i q = _mm512_loadu_si512(p + 2);
    const __m512i index = _mm512_and_si512(q, _mm512_set1_epi16(511));
    const __m512i idx[2] = {_mm512_cvtepu16_epi32(_mm512_castsi512_si256(index)),
                            _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(index, 1))};
    const __m256i s7 = _mm512_cvtepi16_epi8(_mm512_srli_epi16(q, 9));
    alignas(64) uint64_t signs[8];
    _mm512_store_si512(signs, SignBytes7(_mm512_zextsi256_si512(s7)));
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      u->codes[z] = SignedCodes(_mm512_i32gather_epi64(Pieces8(idx, z), kIq2XsGrid, 8), signs[z]);
    }
    u->wsc = Iq2Scales(p + offsetof(BlockIQ2_XS, scales), d);
  }
};

// Piece i: index qs[i] plus bits 2i, 2i+1 of qh (as one u64) above it; sign
// bytes as they are.
struct Iq2S : GridDecoder<WeightType::kIQ2_S> {
  static void Load(const uint8_t* p, Unit* u) {
    const float d = F16ToF32(LoadU16(p));
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    const uint64_t qh = LoadU64(p + offsetof(BlockIQ2_S, qh));
    const __m512i shifts =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512i idx[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i high = _mm512_and_si512(
          _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(qh >> (32 * h))), shifts),
          _mm512_set1_epi32(3));
      const __m128i bytes = h ? _mm256_extracti128_si256(low, 1) : _mm256_castsi256_si128(low);
      idx[h] = _mm512_or_si512(_mm512_cvtepu8_epi32(bytes), _mm512_slli_epi32(high, 8));
    }
    const uint8_t* signs = p + 2 + kQK_K / 8;
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      u->codes[z] = SignedCodes(_mm512_i32gather_epi64(Pieces8(idx, z), kIq2SGrid, 8),
                                LoadU64(signs + 8 * z));
    }
    u->wsc = Iq2Scales(p + offsetof(BlockIQ2_S, scales), d);
  }
};

// 64 8-bit indices of 4-value entries; per group a word of four 7-bit sign
// indices and the scale (bits 28-31).
struct Iq3Xxs : GridDecoder<WeightType::kIQ3_XXS> {
  static void Load(const uint8_t* p, Unit* u) {
    const float d = F16ToF32(LoadU16(p));
    const uint8_t* qs = p + 2;
    const __m512i aux =
        _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + kQK_K / 4)));
    const __m512i fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x1C150E0700), aux);
    const __m512i s7 = _mm512_and_si512(
        _mm512_permutexvar_epi8(_mm512_load_si512(kFirst4OfEachQword.data()), fields),
        _mm512_set1_epi8(0x7F));
    alignas(64) uint64_t signs[8];
    _mm512_store_si512(signs, SignBytes7(s7));
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      const __m512i idx =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * z)));
      u->codes[z] = SignedCodes(_mm512_i32gather_epi32(idx, kIq3XxsGrid, 4), signs[z]);
    }
    const __m256i sc = _mm512_cvtepi64_epi32(
        _mm512_and_si512(_mm512_srli_epi64(fields, 32), _mm512_set1_epi64(0xF)));
    u->wsc = Dup8To16(OddScales8(sc, d * 0.25f));
  }
};

// Entry k: index qs[k] plus bit k of qh (as one u64) as bit 8; sign bytes as
// they are; a nibble scale per group.
struct Iq3S : GridDecoder<WeightType::kIQ3_S> {
  static void Load(const uint8_t* p, Unit* u) {
    const float d = F16ToF32(LoadU16(p));
    const uint8_t* qs = p + offsetof(BlockIQ3_S, qs);
    const uint64_t qh = LoadU64(p + offsetof(BlockIQ3_S, qh));
    const uint8_t* signs = p + offsetof(BlockIQ3_S, signs);
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      __m512i idx =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * z)));
      idx = _mm512_mask_or_epi32(idx, static_cast<__mmask16>(qh >> (16 * z)), idx,
                                 _mm512_set1_epi32(256));
      u->codes[z] = SignedCodes(_mm512_i32gather_epi32(idx, kIq3SGrid, 4), LoadU64(signs + 8 * z));
    }
    const __m256i sc = _mm256_and_si256(
        _mm256_srlv_epi32(
            _mm256_set1_epi32(static_cast<int>(LoadU32(p + offsetof(BlockIQ3_S, scales)))),
            _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(0xF));
    u->wsc = Dup8To16(OddScales8(sc, d));
  }
};

// Piece 4g + l: index qs[4g + l] plus bits 3l .. 3l+2 of qh[g] as bits 8-10;
// qh[g] bits 12-14: the scale, bit 15: the shift's sign.
struct Iq1S : GridDecoder<WeightType::kIQ1_S> {
  static void Load(const uint8_t* p, Unit* u) {
    const float d = F16ToF32(LoadU16(p));
    const __m256i qh = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockIQ1_S, qh))));
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    const __m512i shifts = _mm512_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9);
    __m512i idx[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i group = _mm512_permutexvar_epi32(
          _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
          _mm512_castsi256_si512(
              h ? _mm256_permutevar8x32_epi32(qh, _mm256_setr_epi32(4, 5, 6, 7, 4, 5, 6, 7)) : qh));
      const __m512i high = _mm512_and_si512(_mm512_srlv_epi32(group, shifts), _mm512_set1_epi32(7));
      const __m128i bytes = h ? _mm256_extracti128_si256(low, 1) : _mm256_castsi256_si128(low);
      idx[h] = _mm512_or_si512(_mm512_cvtepu8_epi32(bytes), _mm512_slli_epi32(high, 8));
    }
    // Bit g: group g's shift is negative.
    const unsigned negative = _mm256_movepi32_mask(_mm256_slli_epi32(qh, 16));
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      const unsigned pair = (negative >> (2 * z)) & 3;
      const __mmask8 pieces = static_cast<__mmask8>((pair & 1 ? 0x0F : 0) | (pair & 2 ? 0xF0 : 0));
      u->codes[z] =
          Iq1Codes(_mm512_i32gather_epi64(Pieces8(idx, z), kIq1SGrid, 8), Iq1Delta(pieces));
    }
    const __m256i sc = _mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7));
    u->wsc = Dup8To16(OddScales8(sc, d * 0.125f));
  }
};

// Piece i: index qs[i] plus a nibble of qh[i / 2] (low for even i): bits
// 0-2 above the index, bit 3 the shift's sign. Scales: 3 bits per 16
// elements, element group k at bits 3 (k % 4) of scale word k / 4, whose
// top nibbles make up the f16 d.
struct Iq1M : GridDecoder<WeightType::kIQ1_M> {
  static void Load(const uint8_t* p, Unit* u) {
    const auto* b = reinterpret_cast<const BlockIQ1_M*>(p);
    uint16_t sc[4];
    for (int i = 0; i < 4; ++i) sc[i] = LoadU16(b->scales + 2 * i);
    const float d = F16ToF32(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                   ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000)));
    const __m512i qh =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qh)));
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
    const __m512i shifts = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    __m512i idx[2];
    __mmask16 negative[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i byte = _mm512_permutexvar_epi32(
          _mm512_add_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                           _mm512_set1_epi32(8 * h)),
          qh);
      const __m512i nibble =
          _mm512_and_si512(_mm512_srlv_epi32(byte, shifts), _mm512_set1_epi32(0xF));
      negative[h] = _mm512_test_epi32_mask(nibble, _mm512_set1_epi32(8));
      const __m128i bytes = h ? _mm256_extracti128_si256(low, 1) : _mm256_castsi256_si128(low);
      idx[h] =
          _mm512_or_si512(_mm512_cvtepu8_epi32(bytes),
                          _mm512_slli_epi32(_mm512_and_si512(nibble, _mm512_set1_epi32(7)), 8));
    }
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      const __mmask8 pieces = static_cast<__mmask8>(negative[z / 2] >> (8 * (z % 2)));
      u->codes[z] =
          Iq1Codes(_mm512_i32gather_epi64(Pieces8(idx, z), kIq1SGrid, 8), Iq1Delta(pieces));
    }
    const __m512i words = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
        _mm512_cvtepu16_epi32(
            _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->scales)))));
    const __m512i s = _mm512_and_si512(
        _mm512_srlv_epi32(words, _mm512_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9)),
        _mm512_set1_epi32(7));
    u->wsc = OddScales16(s, d * 0.125f);
  }
};

}  // namespace

template <int NB>
void DotGridAvx512(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
                   float* out) {
  switch (type) {
    case WeightType::kIQ2_XXS:
      return DotQuantized<Iq2Xxs, NB>(type, row, cols, acts, out);
    case WeightType::kIQ2_XS:
      return DotQuantized<Iq2Xs, NB>(type, row, cols, acts, out);
    case WeightType::kIQ2_S:
      return DotQuantized<Iq2S, NB>(type, row, cols, acts, out);
    case WeightType::kIQ3_XXS:
      return DotQuantized<Iq3Xxs, NB>(type, row, cols, acts, out);
    case WeightType::kIQ3_S:
      return DotQuantized<Iq3S, NB>(type, row, cols, acts, out);
    case WeightType::kIQ1_S:
      return DotQuantized<Iq1S, NB>(type, row, cols, acts, out);
    case WeightType::kIQ1_M:
      return DotQuantized<Iq1M, NB>(type, row, cols, acts, out);
    default:
      break;
  }
}

template void DotGridAvx512<1>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotGridAvx512<2>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotGridAvx512<3>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotGridAvx512<4>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);

}  // namespace waste::kernels::internal::avx512
