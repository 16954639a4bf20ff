// AVX2 loops of the codebook types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S), and of Q5_K and Q6_K in their file layout. Compiled with
// AVX2_COPTS (and again with AVXVNNI_COPTS: avx2_variant.h). (Q2_K, Q3_K and IQ4_XS, once
// here too, are register-tiled in matmul_avx2.cc.)
//
// A super-block (256 elements, 8 groups of 32) at a time. A type's decoder
// takes apart what the whole block shares once (Prepare: scales, sign bytes)
// and then yields each group's 32 codes (Group<j>); each activation vector of
// the tile multiplies them with vpmaddubsw and vpmaddwd:
//   - codes are unsigned bytes. The codebook types give the magnitudes (grid
//     values are >= 0) and move the signs onto the activation with vpsignb,
//     as the other operand of vpmaddubsw must be signed anyway (IQ1_S's
//     codes are its grid values + 1 and need no signs);
//   - a scale per 16 elements that is a small integer (the IQ2/IQ1_M
//     (2s + 1)) is the int16 multiplier of vpmaddwd, so a group's
//     dot is exact in int32;
//   - the 8 groups' int32 vectors are summed horizontally in one tree of
//     unpacks and adds (SumsOf4; vphaddd ymm, which it replaced, issues one
//     per 2 cycles on Zen 5) into one vector of 8 group sums, converted once
//     and scaled by [activation d of each group] x [weight scale of each
//     group] in one fma.
//     No loop-carried chain is longer than one fma per super-block.
// IQ1_S's shift (less the 1 its codes add) folds into an fma per group
// against the activation's block sums.
//
// Prepare is forced inline (GCC made a call of IQ3_S's, its Prep returned
// through memory). The codebooks are read with scalar-indexed loads (8-byte
// entries broadcast and blended: Lookup4x64; IQ3's 4-byte ones see
// Lookup8x32): AVX2 gathers (4 such entries per instruction) are slower
// than that on the AMD cores, on Intel cores with the gather-data-sampling
// fix, and for IQ2_XXS even on Sapphire Rapids, where AVX-512's 8-entry
// gathers do win (CodebookReads). The codebook's sign bits are expanded to bytes
// with one vpshufb and a compare per group, from a vector holding the whole
// block's sign bytes; the parity bit that the 7-bit sign indices leave out
// is computed for all 32 at once with two nibble lookups.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "daemon/kernels/avx2_inline.h"
#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/iq_grids.h"
#include "daemon/kernels/matvec_avx2_internal.h"
#include "daemon/kernels/matvec_internal.h"
#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels::internal::WASTE_AVX2_NS {
namespace {

[[gnu::always_inline]] inline __m256i Load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Codebook entries i0..i3 (8 bytes each), in order: each broadcast from
// memory (a load, no shuffle) and blended into place, which any vector ALU
// port can do. (Loaded into xmm halves, then joined, they took 3 shuffles
// per 4 entries: in cache, Sapphire Rapids, ns per 256 weights, IQ1_M 32.1
// -> 28.2, IQ1_S 22.2 -> 20.8, IQ2_S 27.7 -> 26.0, IQ2_XS 24.6 -> 23.5,
// IQ2_XXS the same.)
[[gnu::always_inline]] inline __m256i Lookup4x64(const uint64_t* t, uint32_t i0, uint32_t i1,
                                                 uint32_t i2, uint32_t i3) {
  auto at = [t](uint32_t i) { return _mm256_set1_epi64x(static_cast<int64_t>(t[i])); };
  const __m256i lo = _mm256_blend_epi32(at(i0), at(i1), 0x0C);
  const __m256i hi = _mm256_blend_epi32(at(i2), at(i3), 0xC0);
  return _mm256_blend_epi32(lo, hi, 0xF0);
}
// The entries at the four 16-bit indices packed in w (lowest first).
[[gnu::always_inline]] inline __m256i Lookup4x64(const uint64_t* t, uint64_t w) {
  return Lookup4x64(t, w & 0xFFFF, (w >> 16) & 0xFFFF, (w >> 32) & 0xFFFF, w >> 48);
}

// 64-bit lane J of v.
template <int J>
[[gnu::always_inline]] inline uint64_t Qword(__m256i v) {
  const __m128i h = J / 2 ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v);
  return static_cast<uint64_t>(J % 2 ? _mm_extract_epi64(h, 1) : _mm_cvtsi128_si64(h));
}

// Codebook entries (4 bytes each) at indices index(0) .. index(7), in
// order: vpinsrd into xmm halves, or (kBlend) each broadcast from memory and
// blended into place. IQ3_XXS (index bytes read from memory) measured ~5%
// faster with the first, IQ3_S (indices in 64-bit words) ~40% with the
// second.
template <bool kBlend, typename Index>
[[gnu::always_inline]] inline __m256i Lookup8x32(const uint32_t* t, Index index) {
  if constexpr (kBlend) {
    auto at = [&](int k) { return _mm256_set1_epi32(static_cast<int>(t[index(k)])); };
    const __m256i lo = _mm256_blend_epi32(_mm256_blend_epi32(at(0), at(1), 0x02),
                                          _mm256_blend_epi32(at(2), at(3), 0x08), 0x0C);
    const __m256i hi = _mm256_blend_epi32(_mm256_blend_epi32(at(4), at(5), 0x20),
                                          _mm256_blend_epi32(at(6), at(7), 0x80), 0xC0);
    return _mm256_blend_epi32(lo, hi, 0xF0);
  } else {
    auto half = [&](int k) {
      __m128i v = _mm_cvtsi32_si128(static_cast<int>(t[index(k)]));
      v = _mm_insert_epi32(v, static_cast<int>(t[index(k + 1)]), 1);
      v = _mm_insert_epi32(v, static_cast<int>(t[index(k + 2)]), 2);
      return _mm_insert_epi32(v, static_cast<int>(t[index(k + 3)]), 3);
    };
    return _mm256_set_m128i(half(4), half(0));
  }
}

// The entries (4 bytes each) at the 8 int32 indices of idx: one vpgatherdd.
// Where the core gathers fast enough (grid_gathers), IQ3's loops take this
// instead of Lookup8x32: in cache, Sapphire Rapids, ns per 256 weights,
// IQ3_S 32.6 -> 26.7, IQ3_XXS 29.6 -> 26.8.
[[gnu::always_inline]] inline __m256i Gather8x32(const uint32_t* t, __m256i idx) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(t), idx, 4);
}

// IQ3_S's entries for the group in half H of idx (8 16-bit indices).
template <bool kGather, int H>
[[gnu::always_inline]] inline __m256i Iq3SEntries(__m256i idx) {
  if constexpr (kGather) {
    return Gather8x32(kIq3SGrid, _mm256_cvtepu16_epi32(H ? _mm256_extracti128_si256(idx, 1)
                                                         : _mm256_castsi256_si128(idx)));
  } else {
    const uint64_t w[2] = {Qword<2 * H>(idx), Qword<2 * H + 1>(idx)};
    return Lookup8x32<true>(kIq3SGrid,
                            [&w](int k) { return (w[k / 4] >> (16 * (k % 4))) & 0xFFFF; });
  }
}

// The 32 sign bytes of a block (byte 4g + l: the signs of elements
// 8l .. 8l+7 of group g, bit i for element 8l + i) rearranged so that one
// in-lane vpshufb serves a group: the low 128 bits hold pieces 0 and 1 of
// groups 0..7 (byte 2g + l), the high 128 bits pieces 2 and 3 (byte 2g + l - 2),
// matching the elements' halves of the activation's ymm.
[[gnu::always_inline]] inline __m256i SignLayout(__m256i group_major) {
  const __m256i even_words_first =
      _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                       0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(group_major, even_words_first), 0xD8);
}

// Group J's signs from SignLayout's vector as vpsignb's operand: -1 bytes
// where the element is negative, +1 elsewhere.
template <int J>
[[gnu::always_inline]] inline __m256i SignsOfGroup(__m256i layout) {
  const __m256i spread =
      _mm256_setr_epi8(2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J + 1, 2 * J + 1,
                       2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J,
                       2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J + 1, 2 * J + 1,
                       2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J + 1);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i set = _mm256_and_si256(_mm256_shuffle_epi8(layout, spread), bit);
  return _mm256_or_si256(_mm256_cmpeq_epi8(set, bit), _mm256_set1_epi8(1));
}

// 7-bit sign indices (bytes 0..127) to ggml's sign bytes: bit 7 makes the
// count of set bits even (kIqSigns7), from two 16-entry parity lookups.
[[gnu::always_inline]] inline __m256i SignsFrom7(__m256i idx7) {
  constexpr char kOdd = static_cast<char>(0x80);
  const __m256i parity =
      _mm256_setr_epi8(0, kOdd, kOdd, 0, kOdd, 0, 0, kOdd, kOdd, 0, 0, kOdd, 0, kOdd, kOdd, 0, 0,
                       kOdd, kOdd, 0, kOdd, 0, 0, kOdd, kOdd, 0, 0, kOdd, 0, kOdd, kOdd, 0);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(idx7, m4);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(idx7, 4), m4);
  return _mm256_or_si256(
      idx7, _mm256_xor_si256(_mm256_shuffle_epi8(parity, lo), _mm256_shuffle_epi8(parity, hi)));
}

// Per int32 lane: its four 7-bit fields at bits 0, 7, 14, 21 as bytes.
[[gnu::always_inline]] inline __m256i Fields7(__m256i w) {
  const __m256i two =
      _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi32(0x3FFF)),
                      _mm256_and_si256(_mm256_slli_epi32(w, 2), _mm256_set1_epi32(0x3FFF0000)));
  return _mm256_or_si256(_mm256_and_si256(two, _mm256_set1_epi16(0x7F)),
                         _mm256_and_si256(_mm256_slli_epi16(two, 1), _mm256_set1_epi16(0x7F00)));
}

// Group J's multipliers for vpmaddwd from 16 scale bytes (byte k: elements
// 16k .. 16k+15): int16 lanes 0-7 scale 2J, lanes 8-15 scale 2J + 1.
template <int J, bool kSignedScale>
[[gnu::always_inline]] inline __m256i Scales16(__m128i scales) {
  const __m128i spread =
      _mm_setr_epi8(2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J, 2 * J + 1, 2 * J + 1,
                    2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J + 1, 2 * J + 1);
  const __m128i s = _mm_shuffle_epi8(scales, spread);
  return kSignedScale ? _mm256_cvtepi8_epi16(s) : _mm256_cvtepu8_epi16(s);
}

// (2s + 1) * mult for 8 int32 scale codes.
[[gnu::always_inline]] inline __m256 OddScales(__m256i s, float mult) {
  return _mm256_mul_ps(
      _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_add_epi32(s, s), _mm256_set1_epi32(1))),
      _mm256_set1_ps(mult));
}

// The two nibbles of 8 scale bytes, in order, as 2s + 1 (IQ2_XS, IQ2_S).
[[gnu::always_inline]] inline __m128i OddNibbleScales(const uint8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i s =
      _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
  return _mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1));
}

// Where a type's zero point goes: nowhere, an fma per 8 groups against s32,
// or two per 16 sub-blocks against s16.
enum class Bias { kNone, kPer32, kPer16 };

// One group's codes for the dot (see the file comment).
struct GroupCodes {
  __m256i codes;  // u8.
  __m256i sign;   // kSigned: the activation's vpsignb operand.
  __m256i scale;  // kPer16: int16 multipliers, 8 per half.
};

// IQ2_XXS: per group 4 index bytes, then a word of four 7-bit sign indices
// and the scale (bits 28-31).
struct Iq2Xxs {
  static constexpr int kBlockBytes = sizeof(BlockIQ2_XXS);
  static constexpr bool kSigned = true, kPer16 = false;
  static constexpr Bias kBias = Bias::kNone;
  static constexpr bool kPrepareAhead = true;
  struct Prep {
    __m256i signs;
    __m256 wscale;
  };
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    const float d = F16ToF32(LoadU16(p));
    // The aux words are the odd dwords of qs: [0 1 4 5 | 2 3 6 7] -> in order.
    const __m256 a = _mm256_castsi256_ps(Load256(p + 2));
    const __m256 b = _mm256_castsi256_ps(Load256(p + 34));
    const __m256i aux =
        _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8);
    return {SignLayout(SignsFrom7(Fields7(aux))),
            OddScales(_mm256_srli_epi32(aux, 28), d * 0.125f)};
  }
  template <int J>
  [[gnu::always_inline]] static GroupCodes Group(const uint8_t* p, const Prep& r) {
    const uint8_t* q = p + 2 + 8 * J;
    return {Lookup4x64(kIq2XxsGrid, q[0], q[1], q[2], q[3]), SignsOfGroup<J>(r.signs),
            _mm256_setzero_si256()};
  }
};

// IQ2_XS: 16-bit words, a 9-bit index and a 7-bit sign index; a nibble scale
// per 16.
struct Iq2Xs {
  static constexpr int kBlockBytes = sizeof(BlockIQ2_XS);
  static constexpr bool kSigned = true, kPer16 = true;
  static constexpr Bias kBias = Bias::kNone;
  static constexpr bool kPrepareAhead = true;
  struct Prep {
    __m256i signs;
    __m128i scales;
    __m256 wscale;
  };
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    const __m256i s7 =
        _mm256_permute4x64_epi64(_mm256_packus_epi16(_mm256_srli_epi16(Load256(p + 2), 9),
                                                     _mm256_srli_epi16(Load256(p + 34), 9)),
                                 0xD8);
    return {SignLayout(SignsFrom7(s7)), OddNibbleScales(p + offsetof(BlockIQ2_XS, scales)),
            _mm256_set1_ps(F16ToF32(LoadU16(p)) * 0.125f)};
  }
  template <int J>
  [[gnu::always_inline]] static GroupCodes Group(const uint8_t* p, const Prep& r) {
    const uint8_t* q = p + 2 + 8 * J;
    return {Lookup4x64(kIq2XsGrid, LoadU16(q) & 511, LoadU16(q + 2) & 511, LoadU16(q + 4) & 511,
                       LoadU16(q + 6) & 511),
            SignsOfGroup<J>(r.signs), Scales16<J, false>(r.scales)};
  }
};

// IQ2_S: vpshufb control giving 16-bit lane i of pieces 16h + i the qh
// byte of its group (piece / 4), high byte zero.
alignas(32) constexpr std::array<std::array<int8_t, 32>, 2> kIq2SQhSpread = [] {
  std::array<std::array<int8_t, 32>, 2> t{};
  for (int h = 0; h < 2; ++h) {
    for (int b = 0; b < 32; ++b) {
      const int piece = 16 * h + 8 * (b / 16) + (b % 16) / 2;
      t[h][b] = static_cast<int8_t>(b % 2 ? -128 : piece / 4);
    }
  }
  return t;
}();

// IQ2_S: index bytes plus 2 bits each of qh[g]; sign bytes as they are.
struct Iq2S {
  static constexpr int kBlockBytes = sizeof(BlockIQ2_S);
  static constexpr bool kSigned = true, kPer16 = true;
  static constexpr Bias kBias = Bias::kNone;
  static constexpr bool kPrepareAhead = true;
  struct Prep {
    __m256i signs;
    __m128i scales;
    __m256 wscale;
    __m256i idx[2];
  };
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    Prep r{SignLayout(Load256(p + 2 + kQK_K / 8)),
           OddNibbleScales(p + offsetof(BlockIQ2_S, scales)),
           _mm256_set1_ps(F16ToF32(LoadU16(p)) * 0.125f),
           {}};
    // The 32 indices in 16-bit lanes, piece 4g + l in lane 4g + l: qs byte
    // plus bits 2l, 2l + 1 of qh[g] (spread by vpshufb, moved to bits 8-9 by
    // a multiply). Built one by one in scalar code they took ~5 instructions
    // each, a fifth of the loop; each group's 4 reach the loads as one qword.
    const __m256i qh = _mm256_broadcastsi128_si256(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + offsetof(BlockIQ2_S, qh))));
    const __m256i mult = _mm256_set1_epi64x(0x0004001000400100);
    Unroll<2>([&](auto h) {
      const __m256i high = _mm256_mullo_epi16(
          _mm256_shuffle_epi8(
              qh, _mm256_load_si256(reinterpret_cast<const __m256i*>(kIq2SQhSpread[h].data()))),
          mult);
      r.idx[h] = _mm256_or_si256(
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 + 16 * h))),
          _mm256_and_si256(high, _mm256_set1_epi16(0x300)));
    });
    return r;
  }
  template <int J>
  [[gnu::always_inline]] static GroupCodes Group(const uint8_t*, const Prep& r) {
    return {Lookup4x64(kIq2SGrid, Qword<J % 4>(r.idx[J / 4])), SignsOfGroup<J>(r.signs),
            Scales16<J, false>(r.scales)};
  }
};

// IQ3_XXS: 8 index bytes per group into 4-value entries; the group's word of
// four 7-bit sign indices and scale after the 64 index bytes.
template <bool kGather>
struct Iq3Xxs {
  static constexpr int kBlockBytes = sizeof(BlockIQ3_XXS);
  static constexpr bool kSigned = true, kPer16 = false;
  static constexpr Bias kBias = Bias::kNone;
  static constexpr bool kPrepareAhead = true;
  struct Prep {
    __m256i signs;
    __m256 wscale;
  };
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    const float d = F16ToF32(LoadU16(p));
    const __m256i aux = Load256(p + 2 + kQK_K / 4);
    return {SignLayout(SignsFrom7(Fields7(aux))), OddScales(_mm256_srli_epi32(aux, 28), d * 0.25f)};
  }
  template <int J>
  [[gnu::always_inline]] static GroupCodes Group(const uint8_t* p, const Prep& r) {
    const uint8_t* q = p + 2 + 8 * J;
    return {kGather ? Gather8x32(kIq3XxsGrid, _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                  reinterpret_cast<const __m128i*>(q))))
                    : Lookup8x32<false>(kIq3XxsGrid, [q](int k) { return q[k]; }),
            SignsOfGroup<J>(r.signs), _mm256_setzero_si256()};
  }
};

// IQ3_S: index bytes plus bit k of qh[g] as bit 8; sign bytes as they are; a
// nibble scale per group, x = d (2s + 1) grid. The 64 indices are built as
// 16-bit lanes up front and reach the loads as whole 64-bit words: built one
// by one in scalar code they cost ~5 instructions each.
template <bool kGather>
struct Iq3S {
  static constexpr int kBlockBytes = sizeof(BlockIQ3_S);
  static constexpr bool kSigned = true, kPer16 = false;
  static constexpr Bias kBias = Bias::kNone;
  static constexpr bool kPrepareAhead = false;
  struct Prep {
    __m256i signs;
    __m256 wscale;
    __m256i idx[4];  // Groups 2h, 2h + 1 in idx[h].
  };
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    const __m256i sc = _mm256_and_si256(
        _mm256_srlv_epi32(
            _mm256_set1_epi32(static_cast<int>(LoadU32(p + offsetof(BlockIQ3_S, scales)))),
            _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(0xF));
    Prep r{SignLayout(Load256(p + offsetof(BlockIQ3_S, signs))),
           OddScales(sc, F16ToF32(LoadU16(p))),
           {}};
    const __m256i lane_bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048,
                                               4096, 8192, 16384, static_cast<int16_t>(0x8000));
    const uint8_t* qs = p + offsetof(BlockIQ3_S, qs);
    const uint8_t* qh = p + offsetof(BlockIQ3_S, qh);
    Unroll<4>([&](auto h) {
      const __m256i bits = _mm256_set1_epi16(static_cast<int16_t>(LoadU16(qh + 2 * h)));
      const __m256i high = _mm256_and_si256(
          _mm256_cmpeq_epi16(_mm256_and_si256(bits, lane_bit), lane_bit), _mm256_set1_epi16(256));
      r.idx[h] = _mm256_or_si256(
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * h))),
          high);
    });
    return r;
  }
  template <int J>
  [[gnu::always_inline]] static GroupCodes Group(const uint8_t*, const Prep& r) {
    return {Iq3SEntries<kGather, J % 2>(r.idx[J / 2]), SignsOfGroup<J>(r.signs),
            _mm256_setzero_si256()};
  }
};

// IQ1_S's codebook with each value g as g + 1 (0, 1, 2).
const std::array<uint64_t, 2048> kIq1SPlusOne = Iq1ByteTable(1, 1);

// IQ1_S: index bytes plus 3 bits each of qh[g]. x = d (2s + 1) (g + shift)
// = d (2s + 1) ((g + 1) + (shift - 1)): the codes are g + 1, unsigned, so
// they need no vpsignb, and the shift - 1 per group goes to the bias against
// s32 (llvm-mca, cycles per block at batch 1 / 4: Ice Lake server 51 -> 49 /
// 93 -> 86, Zen 3 50 -> 46 / 86 -> 74; in cache on a noisy Sapphire Rapids,
// best of 12 paired runs, 2-5 % less time). The codebook read by vpgatherdd
// from an 8 KiB nibble table, 4 per block, was ~3 % faster at batch 1 and
// 7-15 % slower at batch 8 on that core: not taken.
struct Iq1S {
  static constexpr int kBlockBytes = sizeof(BlockIQ1_S);
  static constexpr bool kSigned = false, kPer16 = false;
  static constexpr Bias kBias = Bias::kPer32;
  static constexpr bool kPrepareAhead = false;
  struct Prep {
    __m256 wscale;
    __m256 coef;
  };
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    const __m256i qh = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockIQ1_S, qh))));
    const __m256 ws = OddScales(_mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7)),
                                F16ToF32(LoadU16(p)));
    // Bit 15 (the shift is negative) to the sign of 1/8; shift - 1 is exact.
    const __m256 shift = _mm256_xor_ps(_mm256_set1_ps(0.125f),
                                       _mm256_castsi256_ps(_mm256_slli_epi32(
                                           _mm256_and_si256(qh, _mm256_set1_epi32(0x8000)), 16)));
    return {ws, _mm256_mul_ps(ws, _mm256_sub_ps(shift, _mm256_set1_ps(1.0f)))};
  }
  template <int J>
  [[gnu::always_inline]] static GroupCodes Group(const uint8_t* p, const Prep&) {
    const uint8_t* q = p + 2 + 4 * J;
    const uint32_t qh = LoadU16(p + offsetof(BlockIQ1_S, qh) + 2 * J);
    return {Lookup4x64(kIq1SPlusOne.data(), q[0] | ((qh << 8) & 0x700), q[1] | ((qh << 5) & 0x700),
                       q[2] | ((qh << 2) & 0x700), q[3] | ((qh >> 1) & 0x700)),
            _mm256_setzero_si256(), _mm256_setzero_si256()};
  }
};

// IQ1's codebook with each grid value g (-1, 0, 1) as 8g + 1 (-7, 1, 9):
// IQ1_M's codes, 2 less in a piece whose shift is negative.
const std::array<uint64_t, 2048> kIq1Codes = Iq1ByteTable(8, 1);

// IQ1_M: index bytes plus 3 bits of a nibble of qh each, whose bit 3 is the
// shift's sign per 8 elements; codes 8 grid +- 1 (signed: magnitude and
// sign); a 3-bit scale per 16; the f16 d spread over the scale words.
struct Iq1M {
  static constexpr int kBlockBytes = sizeof(BlockIQ1_M);
  static constexpr bool kSigned = true, kPer16 = true;
  static constexpr Bias kBias = Bias::kNone;
  static constexpr bool kPrepareAhead = false;
  struct Prep {
    __m128i scales;
    __m256 wscale;
  };
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    const auto* b = reinterpret_cast<const BlockIQ1_M*>(p);
    uint16_t sc[4];
    for (int i = 0; i < 4; ++i) sc[i] = LoadU16(b->scales + 2 * i);
    const float d = F16ToF32(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                   ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000)));
    // Scale k: bits 3 (k % 4) of word k / 4.
    const __m256i words =
        _mm256_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->scales)));
    const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9);
    const __m256i s0 = _mm256_srlv_epi32(
        _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)), shifts);
    const __m256i s1 = _mm256_srlv_epi32(
        _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3)), shifts);
    const __m256i m7 = _mm256_set1_epi32(7);
    const __m256i w16 = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(_mm256_and_si256(s0, m7), _mm256_and_si256(s1, m7)), 0xD8);
    const __m128i s8 =
        _mm_packus_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
    return {_mm_add_epi8(_mm_add_epi8(s8, s8), _mm_set1_epi8(1)), _mm256_set1_ps(d * 0.125f)};
  }
  template <int J>
  [[gnu::always_inline]] static GroupCodes Group(const uint8_t* p, const Prep& r) {
    const auto* b = reinterpret_cast<const BlockIQ1_M*>(p);
    const uint8_t* q = b->qs + 4 * J;
    const uint32_t qh = LoadU16(b->qh + 2 * J);  // Nibble l: piece l.
    const __m256i up =
        Lookup4x64(kIq1Codes.data(), q[0] | ((qh << 8) & 0x700), q[1] | ((qh << 4) & 0x700),
                   q[2] | (qh & 0x700), q[3] | ((qh >> 4) & 0x700));
    // Piece l (16-bit lanes 4l .. 4l+3) is shifted down where bit 4l + 3 is set.
    const __m256i bit =
        _mm256_setr_epi16(8, 8, 8, 8, 0x80, 0x80, 0x80, 0x80, 0x800, 0x800, 0x800, 0x800,
                          static_cast<int16_t>(0x8000), static_cast<int16_t>(0x8000),
                          static_cast<int16_t>(0x8000), static_cast<int16_t>(0x8000));
    const __m256i down =
        _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(qh)), bit), bit);
    const __m256i codes = _mm256_add_epi8(_mm256_add_epi8(up, down), down);
    return {_mm256_abs_epi8(codes), codes, Scales16<J, false>(r.scales)};
  }
};

// Q6_K (its file layout; the K-types' lane-tiled loops are in matmul_avx2.cc):
// group j = 4n + m of the block (n: 128-element half) has its low 4 bits in
// nibble m / 2 of ql[64n + 32 (m % 2) + l], its high 2 in bits 2m of
// qh[32n + l]; codes q in 0..63 with x = d sc (q - 32) per 16, the int8 sc as
// vpmaddwd's multiplier (|2 x 63 x 127 x 128| < 2^31) and the -32 through the
// activation's 16-sums. These loops (rather than matvec_avx2.cc's group
// loop, which scaled each group in f32 with scalar scale arithmetic) sum a
// block's 8 groups at once: AVX2 in cache, Zen 5, +70 % at batch 1 (Q5_K
// too), +55 % at 4.
struct Q6K {
  static constexpr int kBlockBytes = sizeof(BlockQ6_K);
  static constexpr bool kSigned = false, kPer16 = true;
  static constexpr Bias kBias = Bias::kPer16;
  static constexpr bool kPrepareAhead = false;
  struct Prep {
    __m128i scales;
    __m256 wscale;
    __m256 coef16[2];  // -32 d sc of sub-blocks 0-7, 8-15.
  };
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(p);
    const float d = F16ToF32(b->d);
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
    const __m256 minus32d = _mm256_set1_ps(-32 * d);
    return {sc,
            _mm256_set1_ps(d),
            {_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), minus32d),
             _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc))),
                           minus32d)}};
  }
  template <int J>
  [[gnu::always_inline]] static GroupCodes Group(const uint8_t* p, const Prep& r) {
    constexpr int n = J / 4, m = J % 4;
    const auto* b = reinterpret_cast<const BlockQ6_K*>(p);
    const __m256i ql = Load256(b->ql + 64 * n + 32 * (m % 2));
    const __m256i qh = Load256(b->qh + 32 * n);
    const __m256i low =
        _mm256_and_si256(m / 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(0x0F));
    // Bits 2m, 2m + 1 of each byte to bits 4, 5.
    const __m256i high = _mm256_and_si256(
        m < 2 ? _mm256_slli_epi16(qh, 4 - 2 * m) : _mm256_srli_epi16(qh, 2 * m - 4),
        _mm256_set1_epi8(0x30));
    return {_mm256_or_si256(low, high), _mm256_setzero_si256(), Scales16<J, true>(r.scales)};
  }
};

// Q5_K (file layout): group j's low 4 bits in nibble j % 2 of qs[32 (j / 2)
// + l], its fifth in bit j of qh[l]; codes 0..31, x = d sc q - dmin m per
// group, the mins through the activation's block sums.
struct Q5K {
  static constexpr int kBlockBytes = sizeof(BlockQ5_K);
  static constexpr bool kSigned = false, kPer16 = false;
  static constexpr Bias kBias = Bias::kPer32;
  static constexpr bool kPrepareAhead = false;
  struct Prep {
    __m256i qh;
    __m256 wscale;
    __m256 coef;
  };
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(p);
    const KScaleWords w = UnpackQ4KScales(b->scales);
    // [sc0-7 | m0-7].
    const __m128i scm = _mm_shuffle_epi32(
        _mm_set_epi64x(static_cast<int64_t>(w.hi), static_cast<int64_t>(w.lo)), 0xD8);
    const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(scm));
    const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(scm, 8)));
    return {Load256(b->qh), _mm256_mul_ps(sc, _mm256_set1_ps(F16ToF32(b->d))),
            _mm256_mul_ps(mn, _mm256_set1_ps(-F16ToF32(b->dmin)))};
  }
  template <int J>
  [[gnu::always_inline]] static GroupCodes Group(const uint8_t* p, const Prep& r) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(p);
    const __m256i q = Load256(b->qs + 32 * (J / 2));
    const __m256i low =
        _mm256_and_si256(J % 2 ? _mm256_srli_epi16(q, 4) : q, _mm256_set1_epi8(0x0F));
    // Bit J of each qh byte to bit 4.
    const __m256i high =
        _mm256_and_si256(J < 4 ? _mm256_slli_epi16(r.qh, 4 - J) : _mm256_srli_epi16(r.qh, J - 4),
                         _mm256_set1_epi8(0x10));
    return {_mm256_or_si256(low, high), _mm256_setzero_si256(), _mm256_setzero_si256()};
  }
};

// Per 128-bit half, lane i: the sum of that half's 4 int32 lanes of g[i]
// (what two levels of vphaddd give), by unpacks and adds, which issue on any
// of Zen 5's 4 vector pipes.
[[gnu::always_inline]] inline __m256i SumsOf4(const __m256i g[4]) {
  const __m256i s01 =
      _mm256_add_epi32(_mm256_unpacklo_epi32(g[0], g[1]), _mm256_unpackhi_epi32(g[0], g[1]));
  const __m256i s23 =
      _mm256_add_epi32(_mm256_unpacklo_epi32(g[2], g[3]), _mm256_unpackhi_epi32(g[2], g[3]));
  return _mm256_add_epi32(_mm256_unpacklo_epi64(s01, s23), _mm256_unpackhi_epi64(s01, s23));
}

// kPrepareAhead: Prepare runs one block ahead, so that its chain (the sign
// bytes from 7-bit fields and their parity, or IQ2_S's indices; ~25
// dependent vector ops) is done before the block's groups need it rather
// than delaying all 8 of them. AVX2 in cache, Zen 5, ns per 256 weights:
// IQ2_XXS 16.4 -> 13.8, IQ2_XS 15.4 -> 14.0, IQ2_S 14.9 -> 14.6, IQ3_XXS
// 17.7 -> 17.3. IQ3_S (whose Prep holds 4 more vectors), IQ1 and IQ4_XS
// (since moved to matmul_avx2.cc) measured the same or slower that way.
template <typename Dec, int NB>
void DotSuperBlocks(const uint8_t* row, int64_t blocks, const QuantizedActs* acts, float* out) {
  __m256 acc[NB], bias[NB];
  for (int k = 0; k < NB; ++k) acc[k] = bias[k] = _mm256_setzero_ps();
  typename Dec::Prep next;
  if constexpr (Dec::kPrepareAhead) next = Dec::Prepare(row);
  for (int64_t sb = 0; sb < blocks; ++sb) {
    const uint8_t* block = row + sb * Dec::kBlockBytes;
    PrefetchAhead<Dec::kBlockBytes>(block);
    typename Dec::Prep prep;
    if constexpr (Dec::kPrepareAhead) {
      prep = next;
      if (sb + 1 < blocks) next = Dec::Prepare(block + Dec::kBlockBytes);
    } else {
      prep = Dec::Prepare(block);
    }
    // Per tile entry, groups 0-3 and 4-7 summed by SumsOf4: lane i of the low
    // (high) 128 bits is group i's sum over its elements 0-15 (16-31).
    __m256i half[NB][2];
    Unroll<2>([&](auto h) {
      __m256i g[NB][4];
      Unroll<4>([&](auto jj) {
        constexpr int j = 4 * decltype(h)::value + decltype(jj)::value;
        const GroupCodes c = Dec::template Group<j>(block, prep);
        Unroll<NB>([&](auto k) {
          __m256i a =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(acts[k].qs + kQK_K * sb + 32 * j));
          if constexpr (Dec::kSigned) a = _mm256_sign_epi8(a, c.sign);
          if constexpr (Dec::kPer16) {
            g[k][jj] = _mm256_madd_epi16(_mm256_maddubs_epi16(c.codes, a), c.scale);
          } else {
            g[k][jj] = DotBytes(c.codes, a);
          }
        });
      });
      Unroll<NB>([&](auto k) { half[k][h] = SumsOf4(g[k]); });
    });
    Unroll<NB>([&](auto k) {
      const QuantizedActs& a = acts[k];
      const __m256i sums =
          _mm256_add_epi32(_mm256_blend_epi32(half[k][0], half[k][1], 0xF0),
                           _mm256_permute2x128_si256(half[k][0], half[k][1], 0x21));
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums),
                               _mm256_mul_ps(_mm256_loadu_ps(a.d + 8 * sb), prep.wscale), acc[k]);
      if constexpr (Dec::kBias == Bias::kPer32) {
        bias[k] = _mm256_fmadd_ps(prep.coef, _mm256_loadu_ps(a.s32 + 8 * sb), bias[k]);
      } else if constexpr (Dec::kBias == Bias::kPer16) {
        bias[k] = _mm256_fmadd_ps(prep.coef16[0], _mm256_loadu_ps(a.s16 + 16 * sb), bias[k]);
        bias[k] = _mm256_fmadd_ps(prep.coef16[1], _mm256_loadu_ps(a.s16 + 16 * sb + 8), bias[k]);
      }
    });
  }
  for (int k = 0; k < NB; ++k) out[k] = HorizontalSum(_mm256_add_ps(acc[k], bias[k]));
}

// Reads the IQ3_S entries of 16 indices per vector of idx, the kGather way
// (grid_gathers' probe).
template <bool kGather>
[[gnu::noinline]] __m256i CodebookReadProbe(const __m256i* idx, int count) {
  __m256i sum = _mm256_setzero_si256();
  for (int i = 0; i < count; ++i) {
    sum = _mm256_add_epi32(sum, Iq3SEntries<kGather, 0>(idx[i]));
    sum = _mm256_add_epi32(sum, Iq3SEntries<kGather, 1>(idx[i]));
  }
  return sum;
}

// grid_gathers' reads for IQ3_XXS and IQ3_S: 8192 random entries
// of IQ3_S's codebook (2 KiB, in L1). (AVX2 gathers are slow on the AMD
// cores and where the gather-data-sampling fix is in the microcode.)
void ReadCodebookForProbe(bool gather) {
  alignas(64) static uint16_t raw[8192];
  static const bool filled = (ProbeIndices(raw, 8192, 9), true);
  (void)filled;
  const __m256i* idx = reinterpret_cast<const __m256i*>(raw);
  constexpr int kCount = 8192 / 16;
  const __m256i sum =
      gather ? CodebookReadProbe<true>(idx, kCount) : CodebookReadProbe<false>(idx, kCount);
  asm volatile("" : : "x"(sum));  // The reads are used.
}

// Whether this library's codebook loops gather (CodebookReads).
constinit CodebookGatherChoice grid_gathers(&ReadCodebookForProbe);

}  // namespace

template <int NB>
void DotLowBit(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
               float* out) {
  const int64_t blocks = cols / kQK_K;
  switch (type) {
    case WeightType::kQ5_K:
      return DotSuperBlocks<Q5K, NB>(row, blocks, acts, out);
    case WeightType::kQ6_K:
      return DotSuperBlocks<Q6K, NB>(row, blocks, acts, out);
    case WeightType::kIQ2_XXS:
      return DotSuperBlocks<Iq2Xxs, NB>(row, blocks, acts, out);
    case WeightType::kIQ2_XS:
      return DotSuperBlocks<Iq2Xs, NB>(row, blocks, acts, out);
    case WeightType::kIQ2_S:
      return DotSuperBlocks<Iq2S, NB>(row, blocks, acts, out);
    case WeightType::kIQ3_XXS:
      return grid_gathers.Gathers() ? DotSuperBlocks<Iq3Xxs<true>, NB>(row, blocks, acts, out)
                                    : DotSuperBlocks<Iq3Xxs<false>, NB>(row, blocks, acts, out);
    case WeightType::kIQ3_S:
      return grid_gathers.Gathers() ? DotSuperBlocks<Iq3S<true>, NB>(row, blocks, acts, out)
                                    : DotSuperBlocks<Iq3S<false>, NB>(row, blocks, acts, out);
    case WeightType::kIQ1_S:
      return DotSuperBlocks<Iq1S, NB>(row, blocks, acts, out);
    case WeightType::kIQ1_M:
      return DotSuperBlocks<Iq1M, NB>(row, blocks, acts, out);
    default:
      break;
  }
}

template void DotLowBit<1>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotLowBit<2>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotLowBit<3>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotLowBit<4>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);

}  // namespace waste::kernels::internal::WASTE_AVX2_NS
