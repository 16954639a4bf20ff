// The register-tiled AVX2 loops for Q4_0, Q4_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS
// and MXFP4: a unit of 256 weights (8 blocks of 32) is decoded once and multiplied into up to kTile
// activation vectors before the next unit is read, so that a batch (a prefill chunk, or several
// sessions' decode steps) pays for the decode once per kTile vectors.
//
// Each ymm of codes holds 4 bytes of each of the unit's 8 blocks (32-element
// groups), one per int32 lane, so that the 8 vpmaddubsw of a unit add up in
// int16 (4-bit codes: |8 x 2 x 15 x 127| < 2^15, no saturation) and one
// vpmaddwd leaves lane j with block G(j)'s whole integer dot: one cvt, one
// mul and one fma per activation vector and unit, instead of per group.
// (Q8_0 is not here: its pairs would saturate int16 if summed, and with a
// vpmaddwd per group the layout measured slower than matvec_avx2.cc's loop.)
// The activation is transposed to match once per call (qp), its scales
// put in lane order (ds), and Q4_0's zero point folded into the integer dot
// through the block sums (zs).
//
// Q2_K/Q3_K (a scale per 16) and IQ4_NL/IQ4_XS/MXFP4 (table lookups) keep the
// lane layout but make each code vector just before it is used (Q23K below,
// TableNibbles in matmul_avx2_table.cc): see there for how their sums stay within int16.
//
// Every activation vector runs the same instructions in the same order
// whatever its batch, so a row's result does not depend on its batch.
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "common/logging.h"
#include "daemon/kernels/avx2_inline.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/matmul_avx2_internal.h"
#include "daemon/kernels/matvec_avx2_internal.h"
#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels::internal::WASTE_AVX2_NS::tiled {
namespace {

struct Q4_0 {
  static constexpr int kUnitBytes = 8 * sizeof(BlockQ4_0);
  static constexpr int kZeroPoint = kQ4_0ZeroPoint;
  static constexpr bool kMin = false;
  [[gnu::always_inline]] static void Load(const uint8_t* p, TileUnit* u) {
    LoadBlocks<false>(p, 8, u);
  }
  // A row's groups past its last whole unit, as a unit whose absent blocks
  // are zeros (the activation's are too: see QuantizeActsTiled).
  [[gnu::always_inline]] static void LoadTail(const uint8_t* p, int blocks, TileUnit* u) {
    LoadBlocks<true>(p, blocks, u);
  }

  template <bool kPartial>
  [[gnu::always_inline]] static void LoadBlocks(const uint8_t* p, int blocks, TileUnit* u) {
    const BlockQ4_0* b = reinterpret_cast<const BlockQ4_0*>(p);
    auto qs = [&](int k) {
      if (kPartial && k >= blocks) return _mm_setzero_si128();
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[k].qs));
    };
    __m256i g[4], e[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      g[k] = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(k)), qs(k + 4), 1);
    Transpose4(g, e);  // e[i]: qs bytes 4i..4i+3 of each block.
    const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      u->codes[i] = _mm256_and_si256(e[i], m4);
      u->codes[4 + i] = _mm256_and_si256(_mm256_srli_epi16(e[i], 4), m4);
    }
    // (The same values either way: the conversions are exact.)
    u->wsc = kPartial ? GatherF16x8<sizeof(BlockQ4_0), true>(p, blocks)
                      : GatherHalves<sizeof(BlockQ4_0)>(p);
  }
};

// Q4_0 in the kInterleaved layout: the same codes and scales, from the
// quants laid end to end after the unit's 8 scales.
struct InterleavedQ4_0 {
  static constexpr int kUnitBytes = Q4_0::kUnitBytes;
  static constexpr int kUnitStride = kInterleaveRows * kUnitBytes;
  static constexpr int kZeroPoint = Q4_0::kZeroPoint;
  static constexpr bool kMin = false;
  [[gnu::always_inline]] static void Load(const uint8_t* p, TileUnit* u) {
    const uint8_t* qs = p + kUnitScaleBytes;
    __m256i g[4], e[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      g[k] = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * k))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * (k + 4))), 1);
    }
    Transpose4(g, e);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      u->codes[i] = _mm256_and_si256(e[i], m4);
      u->codes[4 + i] = _mm256_and_si256(_mm256_srli_epi16(e[i], 4), m4);
    }
    u->wsc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

// A unit's 8 code vectors from its 128 bytes of 4-bit codes at q laid out
// in lane order (the kInterleavedLanes layouts): 32 bytes hold codes c in
// their low nibbles and codes 4 + c in their high ones.
[[gnu::always_inline]] inline void LaneNibbles(const uint8_t* q, TileUnit* u) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * c));
    u->codes[c] = _mm256_and_si256(v, m4);
    u->codes[4 + c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  }
}

// Q4_0 in kInterleavedLanes: the quants already as Transpose4 leaves them
// (Q4_0LaneByte), so each 32 bytes give two code vectors with an and and a
// shift (in cache, Zen 5, batch 1: 35 -> 46 GB/s, AVX-VNNI 39 -> 49).
struct LanesQ4_0 : InterleavedQ4_0 {
  [[gnu::always_inline]] static void Load(const uint8_t* p, TileUnit* u) {
    LaneNibbles(p + kUnitScaleBytes, u);
    u->wsc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

struct Q4K {
  static constexpr int kUnitBytes = sizeof(BlockQ4_K);
  static constexpr int kZeroPoint = 0;
  static constexpr bool kMin = true;
  [[gnu::always_inline]] static void Load(const uint8_t* p, TileUnit* u) {
    const BlockQ4_K* b = reinterpret_cast<const BlockQ4_K*>(p);
    __m256i c[4], e[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      c[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * k));
    Transpose4(c, e);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      u->codes[i] = _mm256_and_si256(_mm256_srlv_epi32(e[i], shift), m4);
      u->codes[4 + i] =
          _mm256_and_si256(_mm256_srlv_epi32(_mm256_permute4x64_epi64(e[i], 0x4E), shift), m4);
    }
    LoadScales(p, u);
  }

  // wsc and mcoef from the super-block's header (d, dmin, scales).
  [[gnu::always_inline]] static void LoadScales(const uint8_t* p, TileUnit* u) {
    const BlockQ4_K* b = reinterpret_cast<const BlockQ4_K*>(p);
    // [sc0-3 | m0-3] and [sc4-7 | m4-7], then [sc0-7 | m0-7].
    // The scales in lane order (Q4KLaneGroup: 0, 2, 4, 6, 1, 3, 5, 7), the
    // mins in group order, by one shuffle; d and dmin converted together.
    const KScaleWords w = UnpackQ4KScales(b->scales);
    const __m128i scm =
        _mm_shuffle_epi8(_mm_set_epi64x(static_cast<int64_t>(w.hi), static_cast<int64_t>(w.lo)),
                         _mm_setr_epi8(0, 2, 8, 10, 1, 3, 9, 11, 4, 5, 6, 7, 12, 13, 14, 15));
    const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(LoadU32(p))));
    u->wsc =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(scm)), _mm256_broadcastss_ps(dd));
    u->mcoef = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(scm, 8))),
                             _mm256_broadcastss_ps(_mm_movehdup_ps(dd)));
  }
};

// Q4_K in kInterleaved: the file's super-blocks, a group's taking turns.
struct InterleavedQ4K : Q4K {
  static constexpr int kUnitStride = kInterleaveRows * kUnitBytes;
};

// Q4_K in kInterleavedLanes: its codes already paired as the lanes want them
// (Q4KLaneElem), so each 32 bytes give two code vectors with an and and a
// shift; the same codes and scales as Q4K.
struct LanesQ4K : Q4K {
  static constexpr int kUnitStride = kInterleaveRows * kUnitBytes;
  [[gnu::always_inline]] static void Load(const uint8_t* p, TileUnit* u) {
    LaneNibbles(p + kQ4KHeaderBytes, u);
    LoadScales(p, u);
  }
};

// Q2_K and Q3_K: group g's 2-bit fields are bits 2 (g % 4) of qs[32 (g / 4)
// .. + 31], so codes[i] lane j is dword 4 (i / 4) + (j % 4 + i % 4) % 4 of
// qs half j / 4 shifted by 2 (j % 4): [half 0 | half 1]'s dwords 0-3 (or
// 4-7) rotated by one vpshufd (none for i % 4 == 0: Q2_K 62% -> 64% of
// Q4_K's GB/s at batch 1, 65% -> 66% at 8; Q3_K within noise), one vpsrlvd,
// one and. Q3_K adds bit j of the same hmask dword as bit 2. Lane j is
// group j (kQ23KMap lays out the activation to match); codes 0-3 are its
// first 16 elements, 4-7 its last 16, each half with its own int16 scale
// (vpmaddwd's multiplier). The codes are made one at a time as DotTile16
// consumes them: all 8 at once with the scales left too few of AVX2's 16
// registers (spills, ~2x slower).
template <bool kQ3Type>
struct Q23K {
  static constexpr bool kQ3 = kQ3Type;
  using Block = std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>;
  static constexpr int kUnitBytes = sizeof(Block);
  struct Prep {
    __m256i lo, hi;    // qs dwords 0-3 (4-7) of half 0 | of half 1.
    __m256i hlo, hhi;  // Q3_K: hmask dwords 0-3 (4-7), both 128-bit lanes.
    __m256i sc16[2];   // Lane j: half h's scale of group j, both words.
    __m256i sc32[2];   // AVX-VNNI: the same as one int32 per lane.
    __m256 coef16[2];  // Q2_K: dmin m of sub-blocks 0-7, 8-15 (subtracted times s16).
    __m256 wsc;        // d.
  };

  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    const Block* b = reinterpret_cast<const Block*>(p);
    Prep r;
    // Loaded in 16-byte halves: inserts and broadcasts from memory need no
    // shuffle unit (the code vectors keep those busy).
    auto q16 = [](const uint8_t* x) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
    };
    r.lo = _mm256_inserti128_si256(_mm256_castsi128_si256(q16(b->qs)), q16(b->qs + 32), 1);
    r.hi = _mm256_inserti128_si256(_mm256_castsi128_si256(q16(b->qs + 16)), q16(b->qs + 48), 1);
    if constexpr (kQ3) {
      // The low 128-bit lane (groups 0-3: bits 0-3 of each byte, none lost)
      // shifted up by 2, so that Code's right shift leaves each bit at bit 2.
      const __m256i up = _mm256_setr_epi32(2, 2, 2, 2, 0, 0, 0, 0);
      r.hlo = _mm256_sllv_epi32(_mm256_broadcastsi128_si256(q16(b->hmask)), up);
      r.hhi = _mm256_sllv_epi32(_mm256_broadcastsi128_si256(q16(b->hmask + 16)), up);
    }
    __m128i sc;
    // d (and Q2_K's dmin after it) from one 4-byte load and one conversion:
    // lane 1 of dd is d for Q3_K (the load starts 2 bytes before it), dmin
    // for Q2_K. (Each alone, as a scalar F16ToF32, took a vpinsrw, a
    // conversion and a broadcast.)
    const __m128 dd = _mm_cvtph_ps(
        _mm_cvtsi32_si128(static_cast<int>(LoadU32(p + offsetof(Block, d) - (kQ3 ? 2 : 0)))));
    const __m256 lane1 = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dd), _mm256_set1_epi32(1));
    if constexpr (kQ3) {
      const KScaleWords w = UnpackQ3KScales(b->scales);
      // x = d sc (q - 4): the -4 comes in with the activation's 16-sums
      // (zs: see SumTile16), as integers.
      sc = _mm_sub_epi8(_mm_set_epi64x(static_cast<int64_t>(w.hi), static_cast<int64_t>(w.lo)),
                        _mm_set1_epi8(32));
    } else {
      const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
      sc = _mm_and_si128(s, _mm_set1_epi8(0x0F));
      // The mins zero-extended straight from memory, then shifted down in
      // their dwords (no mask needed).
      auto mins = [&](int i) {
        return _mm256_cvtepi32_ps(_mm256_srli_epi32(
            _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->scales + i))),
            4));
      };
      r.coef16[0] = _mm256_mul_ps(mins(0), lane1);  // dmin m.
      r.coef16[1] = _mm256_mul_ps(mins(8), lane1);
    }
    if constexpr (kVnni) {
      const __m128i even = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
      const __m128i halves = _mm_shuffle_epi8(sc, even);
      r.sc32[0] = _mm256_cvtepi8_epi32(halves);
      r.sc32[1] = _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(halves, halves));
    } else {
      const __m128i even = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
      r.sc16[0] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, even));
      r.sc16[1] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, _mm_add_epi8(even, _mm_set1_epi8(1))));
    }
    r.wsc = kQ3 ? lane1 : _mm256_broadcastss_ps(dd);
    return r;
  }

  template <int I>
  [[gnu::always_inline]] static __m256i Code(const Prep& r) {
    // Lane s of each 128-bit lane takes dword (s + I) % 4 (kQ23KMap): no
    // vpshufd for I % 4 == 0.
    constexpr int kRot = I % 4;
    constexpr int kImm = kRot | (kRot + 1) % 4 << 2 | (kRot + 2) % 4 << 4 | (kRot + 3) % 4 << 6;
    auto rotate = [](__m256i v) {
      if constexpr (kRot == 0) return v;
      return _mm256_shuffle_epi32(v, kImm);
    };
    __m256i c = _mm256_and_si256(
        _mm256_srlv_epi32(rotate(I < 4 ? r.lo : r.hi), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)),
        _mm256_set1_epi8(3));
    if constexpr (kQ3) {
      const __m256i bit =
          _mm256_and_si256(_mm256_srlv_epi32(rotate(I < 4 ? r.hlo : r.hhi),
                                             _mm256_setr_epi32(0, 1, 2, 3, 2, 3, 4, 5)),
                           _mm256_set1_epi8(4));
      c = _mm256_or_si256(c, bit);
    }
    return c;
  }
};
}  // namespace

// The loop of the kPer16 decoders (Q23K): per unit and half h, each code
// vector is multiplied into every activation vector of the tile as it is
// made; the 4 products of a half add up in int16 (2-3 bit codes: |4 x 2 x 7
// x 127| < 2^15), then one vpmaddwd applies the half's scales. With
// AVX-VNNI they add up in int32 (vpdpbusd) and one vpmulld applies them.
template <typename Dec, int NB>
[[gnu::always_inline]] inline void SumTile16(const uint8_t* row, int64_t cols,
                                             const QuantizedActs* acts, __m256* acc_out,
                                             __m256* bias_out) {
  const int64_t units = cols / 256;
  __m256 acc[NB], bias[NB];  // Local until the end (a caller's array went through memory).
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) acc[k] = bias[k] = _mm256_setzero_ps();
  for (int64_t un = 0; un < units; ++un) {
    const typename Dec::Prep prep = Dec::Prepare(row + un * Dec::kUnitBytes);
    __m256i half[NB], dot[NB];
    Unroll<8>([&](auto ii) __attribute__((always_inline)) {
      constexpr int i = decltype(ii)::value;
      const __m256i code = Dec::template Code<i>(prep);
#pragma GCC unroll 8
      for (int k = 0; k < NB; ++k) {
        const __m256i a =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(acts[k].qp + 256 * un + 32 * i));
        if constexpr (kVnni) {
          half[k] = i % 4 == 0 ? DotBytes(code, a) : AddDotBytes(half[k], code, a);
        } else {
          const __m256i p = _mm256_maddubs_epi16(code, a);
          half[k] = i % 4 == 0 ? p : _mm256_add_epi16(half[k], p);
        }
        if constexpr (i % 4 == 3) {
          if constexpr (Dec::kQ3) {
            // Q3_K's zero point: 4 x each 16-sum of the activation, in the
            // lanes (AVX2: the words) the half's sums are in (zs).
            const __m256i zero = _mm256_load_si256(
                reinterpret_cast<const __m256i*>(acts[k].zs + 16 * un + 8 * (i / 4)));
            half[k] = kVnni ? _mm256_sub_epi32(half[k], zero) : _mm256_sub_epi16(half[k], zero);
          }
          const __m256i m = kVnni ? _mm256_mullo_epi32(half[k], prep.sc32[i / 4])
                                  : _mm256_madd_epi16(half[k], prep.sc16[i / 4]);
          dot[k] = i == 3 ? m : _mm256_add_epi32(dot[k], m);
        }
      }
    });
#pragma GCC unroll 8
    for (int k = 0; k < NB; ++k) {
      const QuantizedActs& a = acts[k];
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[k]),
                               _mm256_mul_ps(prep.wsc, _mm256_load_ps(a.ds + 8 * un)), acc[k]);
      if constexpr (!Dec::kQ3) {
        bias[k] = _mm256_fnmadd_ps(prep.coef16[0], _mm256_loadu_ps(a.s16 + 16 * un), bias[k]);
        bias[k] = _mm256_fnmadd_ps(prep.coef16[1], _mm256_loadu_ps(a.s16 + 16 * un + 8), bias[k]);
      }
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) acc_out[k] = acc[k], bias_out[k] = bias[k];
}

template <typename Dec, int NB>
inline void DotTile16(const uint8_t* row, int64_t cols, const QuantizedActs* acts, float* out) {
  __m256 acc[NB], bias[NB];
  SumTile16<Dec, NB>(row, cols, acts, acc, bias);
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) out[k] = HorizontalSum(acc[k]) + HorizontalSum(bias[k]);
}

// Unit `un` of a row, decoded in u, times activation vector a into acc (and
// bias, for a type with mins): DotTile's step.
template <typename Dec>
[[gnu::always_inline]] inline void AccumulateTileUnit(const TileUnit& u, const QuantizedActs& a,
                                                      int64_t un, __m256* acc, __m256* bias) {
  const int8_t* q = a.qp + 256 * un;
  auto act = [q](int i) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * i)); };
#ifdef __AVXVNNI__
  // Two chains of vpdpbusd, each step waiting on the last.
  __m256i even = DotBytes(u.codes[0], act(0)), odd = DotBytes(u.codes[1], act(1));
#pragma GCC unroll 8
  for (int i = 2; i < 8; i += 2) {
    even = AddDotBytes(even, u.codes[i], act(i));
    odd = AddDotBytes(odd, u.codes[i + 1], act(i + 1));
  }
  __m256i dot = _mm256_add_epi32(even, odd);
#else
  __m256i s16 = _mm256_maddubs_epi16(u.codes[0], act(0));
#pragma GCC unroll 8
  for (int i = 1; i < 8; ++i) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(u.codes[i], act(i)));
  __m256i dot = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
#endif
  if constexpr (Dec::kZeroPoint != 0) {
    dot = _mm256_add_epi32(dot, _mm256_load_si256(reinterpret_cast<const __m256i*>(a.zs + 8 * un)));
  }
  const __m256 scale = _mm256_mul_ps(u.wsc, _mm256_load_ps(a.ds + 8 * un));
  *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, *acc);
  if constexpr (Dec::kMin) {
    *bias = _mm256_fmadd_ps(u.mcoef, _mm256_loadu_ps(a.s32 + 8 * un), *bias);
  }
}

template <typename Dec>
[[gnu::always_inline]] inline float FinishTileRow(__m256 acc, __m256 bias) {
  float sum = HorizontalSum(acc);
  if constexpr (Dec::kMin) sum -= HorizontalSum(bias);
  return sum;
}

// DotTile's sums (acc; bias for a type with mins), finished by FinishTileRow
// plus the row's tail groups.
template <typename Dec, int NB>
[[gnu::always_inline]] inline void SumTile(const uint8_t* row, int64_t cols,
                                           const QuantizedActs* acts, __m256* acc_out,
                                           __m256* bias_out) {
  const int64_t units = cols / 256;
  __m256 acc[NB], bias[NB];  // Local until the end (a caller's array went through memory).
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) acc[k] = bias[k] = _mm256_setzero_ps();
  constexpr int64_t kStride = kUnitStep<Dec>;
  for (int64_t un = 0; un < units; ++un) {
    PrefetchAhead<Dec::kUnitBytes>(row + un * kStride);
    TileUnit u;
    Dec::Load(row + un * kStride, &u);
#pragma GCC unroll 8
    for (int k = 0; k < NB; ++k) AccumulateTileUnit<Dec>(u, acts[k], un, &acc[k], &bias[k]);
  }
  if constexpr (kLoadsTail<Dec>) {
    if (const int blocks = TailBlocks<Dec>(row + units * kStride, cols); blocks != 0) {
      TileUnit u;
      Dec::LoadTail(row + units * kStride, blocks, &u);
#pragma GCC unroll 8
      for (int k = 0; k < NB; ++k) AccumulateTileUnit<Dec>(u, acts[k], units, &acc[k], &bias[k]);
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) acc_out[k] = acc[k], bias_out[k] = bias[k];
}

template <typename Dec, int NB>
inline void DotTile(const uint8_t* row, int64_t cols, const QuantizedActs* acts, float* out) {
  __m256 acc[NB], bias[NB];
  SumTile<Dec, NB>(row, cols, acts, acc, bias);
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) out[k] = FinishTileRow<Dec>(acc[k], bias[k]);
}

// The kInterleaveRows rows of a group of a kInterleaved view against one
// activation vector, unit by unit, as one stream (see DotQuantizedGroup in
// matvec_avx512_internal.h); each row's arithmetic is DotTile<Dec, 1>'s.
// (Its rows' sums as 4 variables instead of this array measured the same.)
template <typename Dec>
inline void DotTileGroup(const uint8_t* group, int64_t cols, const QuantizedActs& a, float* out) {
  __m256 acc[kInterleaveRows], bias[kInterleaveRows];
#pragma GCC unroll 8
  for (int i = 0; i < kInterleaveRows; ++i) acc[i] = bias[i] = _mm256_setzero_ps();
  for (int64_t un = 0; un < cols / 256; ++un) {
    const uint8_t* p = group + un * Dec::kUnitStride;
#pragma GCC unroll 8
    for (int i = 0; i < kInterleaveRows; ++i) {
      PrefetchAhead<Dec::kUnitBytes>(p + i * Dec::kUnitBytes);  // Spread, as in DotQuantizedGroup.
      TileUnit u;
      Dec::Load(p + i * Dec::kUnitBytes, &u);
      AccumulateTileUnit<Dec>(u, a, un, &acc[i], &bias[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kInterleaveRows; ++i) out[i] = FinishTileRow<Dec>(acc[i], bias[i]);
}

namespace {

void RowsTiled(const RowsTask& t, int64_t begin, int64_t end) {
  switch (t.w.type) {
    case WeightType::kQ4_0:
      if (t.w.layout == WeightLayout::kInterleavedLanes) {
        return GroupedOrRows<LanesQ4_0, Q4_0>(t, begin, end);
      }
      return GroupedOrRows<InterleavedQ4_0, Q4_0>(t, begin, end);
    case WeightType::kQ4_K:
      if (t.w.layout == WeightLayout::kInterleavedLanes) {
        return GroupedOrRows<LanesQ4K, Q4K>(t, begin, end);
      }
      return GroupedOrRows<InterleavedQ4K, Q4K>(t, begin, end);
    case WeightType::kQ2_K:
      return RowsOf<Q23K<false>>(t, begin, end);
    case WeightType::kQ3_K:
      return RowsOf<Q23K<true>>(t, begin, end);
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS:
    case WeightType::kMXFP4:
      return RowsTable(t, begin, end);
    default:
      WCHECK(false) << "no tiled AVX2 kernel for type " << static_cast<uint32_t>(t.w.type);
  }
}

}  // namespace
}  // namespace waste::kernels::internal::WASTE_AVX2_NS::tiled

namespace waste::kernels::internal::WASTE_AVX2_NS {

const IsaKernels* TiledKernels(WeightType type) {
  static constexpr IsaKernels kKernels = {&tiled::QuantizeActsTiled, &tiled::RowsTiled};
  switch (type) {
    case WeightType::kQ4_0:
    case WeightType::kQ4_K:
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS:
    case WeightType::kMXFP4:
      return &kKernels;
    default:
      return nullptr;
  }
}

}  // namespace waste::kernels::internal::WASTE_AVX2_NS
