// AVX-512 (F/BW/VL/VNNI/VBMI) loops, compiled with those flags and run only
// when DetectIsa() finds them.
//
// The quantized types work in units of 256 elements (one K-quant super-block,
// eight legacy blocks). Weight bytes go to vpdpbusd with as little moving as
// possible: the activation is reordered instead (QuantizedActs::qp, once per
// call, shared by every row), so that e.g. a Q4_0 block's 16 bytes give its
// low and its high nibbles with one and / shift each. Each int32 lane of a
// vpdpbusd result then belongs to one scale group (32 elements; 16 for Q6_K),
// so the scales apply per lane in f32: one vpermps spreads the unit's 8
// (or 16) combined scales over the lanes, one cvt and one fma per vector of
// lanes into accumulators that are reduced once per row. Most types lay their
// codes out so that two zmm of products share their lanes' groups and chain
// into one such vector (kLaneVecs 2). The weight's zero point or min folds
// into one masked add per unit against the activation's group sums (see Group
// in matvec_scalar.cc). A decode step's rows go 4 to a call (DecodeRowQuads),
// one reduction for the 4. A row of a 32-element-block type that is not a
// multiple of 256 long ends with a partial unit, its absent blocks zeros
// (LoadTail; the activation is padded to match).
//
// That unit loop (DotQuantized) lives in matvec_avx512_internal.h: this file
// holds the decoders of the legacy, K- and IQ4 types; matvec_avx512_float.cc
// the loop of the float types;
// matvec_avx512_acts.cc the activation quantizer; matvec_avx512_iq.cc those of the codebook types;
// matvec_avx512_lane16.cc Q2_K and Q3_K, whose own loop chains a unit's
// products into one vector of per-16 sums (ActOrder::kLane16).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "daemon/kernels/fp16.h"
#include "daemon/kernels/matvec_avx512_internal.h"
#include "daemon/kernels/matvec_internal.h"
#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels::internal::avx512 {
namespace {

// A 16-entry code table (IQ4's grid, MXFP4's doubled E2M1 values) + kOffset
// as u8 (vpdpbusd's unsigned operand), in each 128-bit lane for vpshufb.
template <const int8_t* kTable, int kOffset>
[[gnu::always_inline]] inline __m512i CodeTable() {
  return _mm512_add_epi8(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kTable))),
      _mm512_set1_epi8(static_cast<char>(kOffset)));
}
[[gnu::always_inline]] inline __m512i Iq4Table() { return CodeTable<kIq4NlValues, 128>(); }

// The 16-bit words at p + kStride * i, i < 8, put together in integer
// registers (off the vector ports, which the dot products keep busy). A
// partial unit (kPartial) reads only its first `blocks` words, 0 for the rest.
template <int kStride, bool kPartial = false>
[[gnu::always_inline]] inline __m128i GatherU16x8(const uint8_t* p, int blocks = 8) {
  auto word = [&](int i) -> uint64_t {
    return !kPartial || i < blocks ? LoadU16(p + kStride * i) : 0;
  };
  uint64_t lo = 0, hi = 0;
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    lo |= word(i) << (16 * i);
    hi |= word(i + 4) << (16 * i);
  }
  return _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
}

// As GatherU16x8 for 32-bit words.
template <int kStride, bool kPartial = false>
[[gnu::always_inline]] inline __m256i GatherU32x8(const uint8_t* p, int blocks = 8) {
  auto word = [&](int i) -> uint64_t {
    return !kPartial || i < blocks ? LoadU32(p + kStride * i) : 0;
  };
  int64_t q[4];
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) q[i] = static_cast<int64_t>(word(2 * i) | (word(2 * i + 1) << 32));
  return _mm256_set_epi64x(q[3], q[2], q[1], q[0]);
}

// The 64 bytes at p + offset of a unit whose first `bytes` are a partial
// unit's (kPartial): the rest come back 0 and are not read (a masked load,
// which cannot fault past the matrix).
template <bool kPartial>
[[gnu::always_inline]] inline __m512i LoadUnitBytes(const uint8_t* p, int offset, int bytes) {
  if constexpr (!kPartial) return _mm512_loadu_si512(p + offset);
  const int n = bytes - offset;
  const uint64_t mask = n >= 64 ? ~uint64_t{0} : n > 0 ? (uint64_t{1} << n) - 1 : 0;
  return _mm512_maskz_loadu_epi8(mask, p + offset);
}

// [d0..d7, d0..d7] from 8 f16 scales: the weight scales and, for a type whose
// zero point is a constant (kSumScale), the coefficients of the group sums.
[[gnu::always_inline]] inline __m512 ScaleTwice(__m128i halves) {
  return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(halves));
}

// 8 E8M0 exponents (the low bytes of e) as the float bits of 2^(e - 128):
// (e - 1) << 23, or the subnormal 2^-128 << e for e < 2.
[[gnu::always_inline]] inline __m256i Mxfp4ScaleBits(__m128i e_bytes) {
  const __m256i e = _mm256_cvtepu8_epi32(e_bytes);
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  return _mm256_mask_blend_epi32(_mm256_cmplt_epu32_mask(e, _mm256_set1_epi32(2)), normal,
                                 subnormal);
}

// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4: each half unit (4 blocks) is one
// vpermt2b that packs the 64 nibble bytes, then low nibbles (the first 16
// elements of each block) and high nibbles (the last 16); the activation is
// in kNibble32 order to match. Both nibbles of a byte belong to one block, so
// the two vpdpbusd of a half chain into one zmm of lanes, 4 lanes per block.
// IQ4_NL and MXFP4 (kCodes) look their nibbles up in their table, + 128
// (IQ4) or + kMxfp4CodeOffset, which is then the zero point. (An enum, not
// the table's address: GCC's sanitizers make address comparisons
// non-constant.)
enum class NibbleCodes { kPlain, kIq4Nl, kMxfp4 };

template <typename Block, int kQsOffset, bool kFifthBit, bool kMin,
          NibbleCodes kCodes = NibbleCodes::kPlain>
struct Nibble32 {
  static constexpr int kBlock = sizeof(Block);
  static constexpr int kUnitBytes = 8 * kBlock;
  static constexpr ActOrder kOrder = ActOrder::kNibble32;
  static constexpr int kLaneVecs = 2;
  static constexpr bool kPer16 = false;
  static constexpr bool kTabled = kCodes != NibbleCodes::kPlain;
  static constexpr int kCodeOffset = kCodes == NibbleCodes::kMxfp4 ? kMxfp4CodeOffset : 128;
  static constexpr float kSumScale = kTabled ? -kCodeOffset : kMin ? 1 : kFifthBit ? -16 : -8;
  // The second load of a half ends where its 4 blocks end (never past the row).
  static constexpr int kSecond = 4 * kBlock - 64;
  static constexpr SlotTable kSlots = kHalves32Slots;
  alignas(64) static constexpr std::array<uint8_t, 64> kQsIndex = [] {
    std::array<uint8_t, 64> t{};
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 16; ++j) {
        const int pos = kBlock * i + kQsOffset + j;
        t[16 * i + j] = static_cast<uint8_t>(pos < 64 ? pos : 64 + pos - kSecond);
      }
    }
    return t;
  }();

  // kFifthBit: where vpermt2b finds the half's 4 qh words (first the low
  // 16 bits of each, then the high 16), as kQsIndex does its quants.
  alignas(64) static constexpr std::array<uint8_t, 64> kQhIndex = [] {
    std::array<uint8_t, 64> t{};
    if constexpr (kFifthBit) {
      for (int i = 0; i < 4; ++i) {
        for (int b = 0; b < 4; ++b) {
          const int pos = kBlock * i + static_cast<int>(offsetof(Block, qh)) + b;
          t[8 * (b / 2) + 2 * i + b % 2] =
              static_cast<uint8_t>(pos < 64 ? pos : 64 + pos - kSecond);
        }
      }
    }
    return t;
  }();

  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) { LoadBlocks<false>(p, 8, u); }

  // A half's bytes past its first 64, for vpermt2b's second table: bytes
  // kSecond + 32 ... 4 kBlock - 1 of the half, where kQsIndex looks (its
  // upper 32 bytes; a broadcast, which is a load alone). A 64-byte load at
  // kSecond instead, overlapping the first, streamed from memory at ~60 % of
  // the rate of Q4_K's loop, 1 and 2 threads, Zen 5 (Q4_0, IQ4_NL; MXFP4
  // ~70 %), and at 90-100 % this way, equally fast in cache. A partial
  // half's is a masked load of 64 (its lower 32 bytes unused).
  static_assert(kSecond <= 32, "kQsIndex's second-table bytes must lie in its upper 32");
  template <bool kPartial>
  [[gnu::always_inline]] static __m512i LoadSecond(const uint8_t* half, int bytes) {
    if constexpr (kPartial) return LoadUnitBytes<true>(half, kSecond, bytes);
    return _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + kSecond + 32)));
  }

  // A row's groups past its last whole unit, as a unit whose absent blocks
  // are zeros (the activation's are too: see QuantizedActs::qp). Lane vector
  // v holds blocks 4 v .. 4 v + 3, so with 4 blocks or fewer the second half
  // is neither read nor made (see AccumulateUnit's lane_vecs).
  [[gnu::always_inline]] static void LoadTail(const uint8_t* p, int blocks, Unit* u) {
    LoadBlocks<true>(p, blocks, u);
  }

  template <bool kPartial>
  [[gnu::always_inline]] static void LoadBlocks(const uint8_t* p, int blocks, Unit* u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i index = _mm512_load_si512(kQsIndex.data());
    const int halves = kPartial && blocks <= 4 ? 1 : 2;
    __m512i first[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      if (kPartial && h >= halves) break;
      const uint8_t* base = p + 4 * kBlock * h;
      const int bytes = kBlock * (blocks - 4 * h);  // Of this half's (kPartial).
      first[h] = LoadUnitBytes<kPartial>(base, 0, bytes);
      const __m512i second = LoadSecond<kPartial>(base, bytes);
      const __m512i q = _mm512_permutex2var_epi8(first[h], index, second);
      __m512i lo = _mm512_and_si512(q, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
      if constexpr (kFifthBit) {
        // Bit j of a block's qh is element j's fifth bit (added: the nibble
        // has no bit 4): the low 16 bits of the half's 4 qh go with the low
        // nibbles, the high 16 with the high ones, each set of 4 one 64-bit
        // mask, picked from the loads by one vpermb (an absent block's are
        // 0). Assembled in integer registers instead (4 loads, 12 shifts and
        // ors), in cache, Zen 5: batch 1 Q5_0 33.3 -> 37.1 GB/s, Q5_1 39.0 ->
        // 40.1, at 128 columns +12 / +19 %; a tile of 4 3 % slower.
        const __m128i qh = _mm512_castsi512_si128(
            _mm512_permutex2var_epi8(first[h], _mm512_load_si512(kQhIndex.data()), second));
        const __m512i bit4 = _mm512_set1_epi8(0x10);
        lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64(_mm_cvtsi128_si64(qh)), lo, bit4);
        hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64(_mm_extract_epi64(qh, 1)), hi, bit4);
      }
      if constexpr (kTabled) {
        const __m512i table = kCodes == NibbleCodes::kMxfp4
                                  ? CodeTable<kMxfp4Values, kCodeOffset>()
                                  : CodeTable<kIq4NlValues, kCodeOffset>();
        lo = _mm512_shuffle_epi8(table, lo);
        hi = _mm512_shuffle_epi8(table, hi);
      }
      u->codes[2 * h] = lo;
      u->codes[2 * h + 1] = hi;
    }
    if constexpr (kBlock == 18) {
      // Q4_0, IQ4_NL: the 8 scales are words 0, 9, 18, 27 of each half's first load;
      // gathered twice, they convert straight to [d x8 | d x8].
      const __m512i idx = _mm512_castsi256_si512(
          _mm256_setr_epi16(0, 9, 18, 27, 32, 41, 50, 59, 0, 9, 18, 27, 32, 41, 50, 59));
      u->wsc = _mm512_cvtph_ps(
          _mm512_castsi512_si256(_mm512_permutex2var_epi16(first[0], idx, first[1])));
    } else if constexpr (std::is_same_v<Block, BlockMXFP4>) {
      // The 8 E8M0 exponents (bytes 0, 17, 34, 51 of each half's first load)
      // picked by one vpermt2b.
      const __m512i idx = _mm512_castsi128_si512(
          _mm_setr_epi8(0, 17, 34, 51, 64, 81, 98, 115, 0, 0, 0, 0, 0, 0, 0, 0));
      __m256i bits =
          Mxfp4ScaleBits(_mm512_castsi512_si128(_mm512_permutex2var_epi8(first[0], idx, first[1])));
      // An absent block's exponent 0 would be the subnormal 2^-128, which
      // every multiply then takes a slow assist for (MXFP4 at 128 columns
      // 40 % slower than with this 0).
      if constexpr (kPartial) bits = _mm256_maskz_mov_epi32((1u << blocks) - 1, bits);
      u->wsc = _mm512_broadcast_f32x8(_mm256_castsi256_ps(bits));
    } else if constexpr (kMin) {
      // d and m are adjacent: [d0 m0 d1 m1 ...] -> [d0..d7, m0..m7].
      const __m512 dm = _mm512_cvtph_ps(GatherU32x8<kBlock, kPartial>(p, blocks));
      u->wsc = _mm512_permutexvar_ps(
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15), dm);
    } else {
      u->wsc = ScaleTwice(GatherU16x8<kBlock, kPartial>(p, blocks));
    }
  }
};
using Q4_0 = Nibble32<BlockQ4_0, offsetof(BlockQ4_0, qs), false, false>;
using Q4_1 = Nibble32<BlockQ4_1, offsetof(BlockQ4_1, qs), false, true>;
using Q5_0 = Nibble32<BlockQ5_0, offsetof(BlockQ5_0, qs), true, false>;
using Q5_1 = Nibble32<BlockQ5_1, offsetof(BlockQ5_1, qs), true, true>;
using IQ4NL = Nibble32<BlockIQ4_NL, offsetof(BlockIQ4_NL, qs), false, false, NibbleCodes::kIq4Nl>;
using MXFP4 = Nibble32<BlockMXFP4, offsetof(BlockMXFP4, qs), false, false, NibbleCodes::kMxfp4>;

// The table codes of two halves of 4 groups' 16 nibble bytes each (IQ4's
// grid + 128 by default; IQ4_XS's, IQ4_NL's and MXFP4's blocks): low
// nibbles then high ones, as Nibble32's.
[[gnu::always_inline]] inline void Iq4Codes(const __m512i q[2], Unit* u,
                                            __m512i table = Iq4Table()) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u->codes[2 * h] = _mm512_shuffle_epi8(table, _mm512_and_si512(q[h], m4));
    u->codes[2 * h + 1] =
        _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q[h], 4), m4));
  }
}

// IQ4_XS's 8 group scales d (ls - 32), twice.
[[gnu::always_inline]] inline __m512 Iq4XsScales(const uint8_t* p) {
  const BlockIQ4_XS* b = reinterpret_cast<const BlockIQ4_XS*>(p);
  // Group g: bits 4g.. of scales_l (as one u32), bits 2g.. of scales_h.
  const __m256i low =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(LoadU32(b->scales_l))),
                                         _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                       _mm256_set1_epi32(0xF));
  const __m256i high = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(LoadU16(p + offsetof(BlockIQ4_XS, scales_h))),
                        _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
      _mm256_set1_epi32(3));
  const __m256i ls =
      _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
  const __m256 sc = _mm256_mul_ps(_mm256_cvtepi32_ps(ls), _mm256_set1_ps(F16ToF32(b->d)));
  return _mm512_broadcast_f32x8(sc);
}

// IQ4_XS: a unit is one block; each 64 bytes of qs are 4 groups' nibbles in
// the kNibble32 order already, looked up in the grid (+128) as for IQ4_NL.
// The 8 6-bit group scales are assembled in one ymm of int32 lanes.
struct IQ4XS {
  static constexpr int kUnitBytes = sizeof(BlockIQ4_XS);
  static constexpr ActOrder kOrder = ActOrder::kNibble32;
  static constexpr int kLaneVecs = 2;
  static constexpr bool kPer16 = false;
  static constexpr float kSumScale = -128;
  static constexpr SlotTable kSlots = Q4_0::kSlots;
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const BlockIQ4_XS* b = reinterpret_cast<const BlockIQ4_XS*>(p);
    const __m512i q[2] = {_mm512_loadu_si512(b->qs), _mm512_loadu_si512(b->qs + 64)};
    Iq4Codes(q, u);
    u->wsc = Iq4XsScales(p);
  }
};

// Q8_0: two blocks per zmm; codes are q ^ 0x80 = q + 128 as u8, the 128 comes
// back out through the coefficient -128 d (vpdpbusd does not saturate). Each
// two zmm re-paired by halves of blocks (PairHalves32; the activation in
// kHalves32 order), so that lane L of both belongs to block L / 4 of their 4
// and their vpdpbusd chain into one int32 vector: one cvt, vpermps and fma
// per 4 blocks instead of per 2.
struct Q8_0 {
  static constexpr int kUnitBytes = 8 * sizeof(BlockQ8_0);
  static constexpr ActOrder kOrder = ActOrder::kHalves32;
  static constexpr int kLaneVecs = 2;
  static constexpr bool kPer16 = false;
  static constexpr float kSumScale = -128;
  static constexpr SlotTable kSlots = kHalves32Slots;
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) { LoadBlocks<false>(p, 8, u); }
  // As Nibble32::LoadTail.
  [[gnu::always_inline]] static void LoadTail(const uint8_t* p, int blocks, Unit* u) {
    LoadBlocks<true>(p, blocks, u);
  }

  template <bool kPartial>
  [[gnu::always_inline]] static void LoadBlocks(const uint8_t* p, int blocks, Unit* u) {
    const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(p);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    // An absent block's 32 bytes: not read, 0.
    auto qs = [&](int i) {
      if constexpr (!kPartial) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
      return _mm256_maskz_loadu_epi8(i < blocks ? ~0u : 0u, b[i].qs);
    };
    const int halves = kPartial && blocks <= 4 ? 1 : 2;
#pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      if (kPartial && h >= halves) break;
#pragma GCC unroll 2
      for (int z = 2 * h; z < 2 * h + 2; ++z) {
        u->codes[z] = _mm512_xor_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(qs(2 * z)), qs(2 * z + 1), 1), flip);
      }
      PairHalves32(&u->codes[2 * h], &u->codes[2 * h + 1]);
    }
    u->wsc = ScaleTwice(GatherU16x8<sizeof(BlockQ8_0), kPartial>(p, blocks));
  }
};

// Q4_0 and Q8_0 in the kInterleaved layout: the unit's 8 scales are one
// load, its quants the codes Nibble32's vpermt2b and Q8_0's inserts gather
// (the same codes and scales, so the same results).
// Each takes its file layout's constants and replaces only Load.
struct InterleavedQ4_0 : Q4_0 {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i q = _mm512_loadu_si512(p + kUnitScaleBytes + 64 * h);
      u->codes[2 * h] = _mm512_and_si512(q, m4);
      u->codes[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    }
    u->wsc = ScaleTwice(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

// The 128 code bytes of a kInterleavedLanes unit at q (the AVX2 loops'
// layout, LaneCodeByte) back in group order: half h holds groups 4h .. 4h + 3,
// 16 bytes each, by one vpermt2b of the 128.
[[gnu::always_inline]] inline void LaneCodesInGroupOrder(const uint8_t* q, __m512i half[2]) {
  alignas(64) static constexpr std::array<std::array<uint8_t, 64>, 2> kGroupOrder = [] {
    std::array<std::array<uint8_t, 64>, 2> t{};
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 16; ++i)
          t[h][16 * k + i] = static_cast<uint8_t>(LaneCodeByte(4 * h + k, i));
    return t;
  }();
  const __m512i lo = _mm512_loadu_si512(q);
  const __m512i hi = _mm512_loadu_si512(q + 64);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
    half[h] = _mm512_permutex2var_epi8(lo, _mm512_load_si512(kGroupOrder[h].data()), hi);
}

// Q4_0 in kInterleavedLanes: its quants in block order (LaneCodesInGroupOrder),
// then InterleavedQ4_0's codes.
struct LanesQ4_0 : InterleavedQ4_0 {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i q[2];
    LaneCodesInGroupOrder(p + kUnitScaleBytes, q);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      u->codes[2 * h] = _mm512_and_si512(q[h], m4);
      u->codes[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(q[h], 4), m4);
    }
    u->wsc = ScaleTwice(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

// IQ4_NL in kInterleavedLanes: as LanesQ4_0, the nibbles then looked up as
// IQ4NL's (the same codes and scales).
struct LanesIQ4NL : IQ4NL {
  static_assert(kCodeOffset == 128);
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    __m512i q[2];
    LaneCodesInGroupOrder(p + kUnitScaleBytes, q);
    Iq4Codes(q, u);
    u->wsc = ScaleTwice(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

// MXFP4 in kInterleavedLanes: its codes in group order, looked up as
// MXFP4's, its 8 exponents one load.
struct LanesMXFP4 : MXFP4 {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    __m512i q[2];
    LaneCodesInGroupOrder(p + LaneHeaderBytes(WeightType::kMXFP4), q);
    Iq4Codes(q, u, CodeTable<kMxfp4Values, kCodeOffset>());
    u->wsc = _mm512_broadcast_f32x8(
        _mm256_castsi256_ps(Mxfp4ScaleBits(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
  }
};

// IQ4_XS in kInterleavedLanes: its header as it is, its codes in group
// order (LaneCodesInGroupOrder), then IQ4XS's.
struct LanesIQ4XS : IQ4XS {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    __m512i q[2];
    LaneCodesInGroupOrder(p + offsetof(BlockIQ4_XS, qs), q);
    Iq4Codes(q, u);
    u->wsc = Iq4XsScales(p);
  }
};

struct InterleavedQ8_0 : Q8_0 {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z)
      u->codes[z] = _mm512_xor_si512(_mm512_loadu_si512(p + kUnitScaleBytes + 64 * z), flip);
    PairHalves32(&u->codes[0], &u->codes[1]);
    PairHalves32(&u->codes[2], &u->codes[3]);
    u->wsc = ScaleTwice(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

// Q4_K, Q5_K: byte 32 p + i of qs holds element i of group 2 p in its low
// nibble, of group 2 p + 1 in its high one. Two vpermt2d of the 128 bytes
// put in lane L of zmm h the dword 4 (L % 4) + 16 h of pair p = L / 4, so
// that the low nibbles of both zmm (codes 0 and 1: elements 0-15 and 16-31)
// belong to group 2 (L / 4) and the high ones (codes 2, 3) to group
// 2 (L / 4) + 1: each pair's two vpdpbusd chain into one int32 vector
// (kLaneVecs 2), one cvt, vpermps and fma per pair instead of per zmm: in
// cache, Zen 5, batch 1 Q4_K +2 % and Q5_K +5 %, a tile of 4 activation
// vectors (prefill, batched decode) +24 % and +31 %. The activation is in
// kNibbleK order to match.
// The 6-bit scales and mins are unpacked in integer registers and converted
// together: 16 lanes [sc0..sc7, m0..m7] times [d x8, dmin x8].
template <bool kQ5>
struct Q45K {
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  static constexpr int kUnitBytes = sizeof(Block);
  static constexpr ActOrder kOrder = ActOrder::kNibbleK;
  static constexpr int kLaneVecs = 2;
  static constexpr bool kPer16 = false;
  static constexpr float kSumScale = -1;  // The min is subtracted.
  static constexpr SlotTable kSlots = [] {
    SlotTable t{};
    for (int v = 0; v < 2; ++v)
      for (int l = 0; l < 16; ++l) t[v][l] = 2 * (l / 4) + v;
    return t;
  }();
  // Dword L of zmm h: 4 (L % 4) + 16 h bytes into pair L / 4 (32 bytes).
  alignas(64) static constexpr std::array<std::array<int32_t, 16>, 2> kPairDwords = [] {
    std::array<std::array<int32_t, 16>, 2> t{};
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 16; ++l) t[h][l] = 8 * (l / 4) + 4 * h + l % 4;
    return t;
  }();
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const Block* b = reinterpret_cast<const Block*>(p);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i q0 = _mm512_loadu_si512(b->qs), q1 = _mm512_loadu_si512(b->qs + 64);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i x = _mm512_permutex2var_epi32(q0, _mm512_load_si512(kPairDwords[h].data()), q1);
      __m512i lo = _mm512_and_si512(x, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
      if constexpr (kQ5) {
        // Element e of group g takes bit g of qh[e]: 128-bit lane k of zmm h
        // holds elements 16 h .. 16 h + 15 of groups 2 k (low) and 2 k + 1.
        const __m512i bits = _mm512_broadcast_i32x4(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qh + 16 * h)));
        const __m512i even =
            _mm512_set_epi32(0x40404040, 0x40404040, 0x40404040, 0x40404040, 0x10101010, 0x10101010,
                             0x10101010, 0x10101010, 0x04040404, 0x04040404, 0x04040404, 0x04040404,
                             0x01010101, 0x01010101, 0x01010101, 0x01010101);
        const __m512i bit4 = _mm512_set1_epi8(0x10);
        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(bits, even), lo, bit4);
        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(bits, _mm512_add_epi8(even, even)), hi,
                                  bit4);
      }
      u->codes[h] = lo;
      u->codes[2 + h] = hi;
    }
    LoadScales(p, u);
  }

  // wsc from the super-block's header (d, dmin, scales), which Q5_K shares.
  [[gnu::always_inline]] static void LoadScales(const uint8_t* p, Unit* u) {
    const BlockQ4_K* b = reinterpret_cast<const BlockQ4_K*>(p);
    const KScaleWords w = UnpackQ4KScales(b->scales);  // [sc0-3 | m0-3], [sc4-7 | m4-7].
    const __m128i scm = _mm_shuffle_epi32(
        _mm_set_epi64x(static_cast<int64_t>(w.hi), static_cast<int64_t>(w.lo)), 0xD8);
    const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(scm));  // [sc0-7, m0-7]
    // [d x8, dmin x8]; the min term is subtracted (kSumScale).
    const __m512 mult = _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(LoadU32(p))))));
    u->wsc = _mm512_mul_ps(f, mult);
  }
};

// Q4_K in kInterleavedLanes: the same codes and scales as Q45K, each zmm of
// codes gathered from the re-paired bytes (Q4KLaneElem) by one vpermt2d and
// one per-lane shift. (kInterleaved needs none of that: Q45K itself reads it.)
struct InterleavedQ4K : Q45K<false> {
  // Zmm v, lane l (group 2 (l / 4) + v / 2, quad l % 4 + 4 (v % 2), as
  // Q45K::Load places them): the dword of the unit's codes that holds it, and
  // its nibble's shift.
  struct Gather {
    std::array<std::array<int32_t, 16>, 4> dword, shift;
  };
  static constexpr Gather kGather = [] {
    Gather t{};
    for (int v = 0; v < 4; ++v) {
      for (int l = 0; l < 16; ++l) {
        const int g = 2 * (l / 4) + v / 2, q = l % 4 + 4 * (v % 2);
        const int j = g % 2 == 0 ? g / 2 : 4 + g / 2;
        const int i = j < 4 ? q : (q + 4) % 8;  // Q4KLaneElem(i, j, 0) == 4 q.
        t.dword[v][l] = 8 * (i % 4) + j;
        t.shift[v][l] = 4 * (i / 4);
      }
    }
    return t;
  }();
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i lo = _mm512_loadu_si512(p + kQ4KHeaderBytes);
    const __m512i hi = _mm512_loadu_si512(p + kQ4KHeaderBytes + 64);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512i d =
          _mm512_permutex2var_epi32(lo, _mm512_loadu_si512(kGather.dword[v].data()), hi);
      u->codes[v] =
          _mm512_and_si512(_mm512_srlv_epi32(d, _mm512_loadu_si512(kGather.shift[v].data())), m4);
    }
    LoadScales(p, u);
  }
};

// Q6_K: codes made per 64 elements in natural order, then each 128's two zmm
// re-paired by two vpermt2d (kPairs16: zmm 0 takes elements 0-7 of each of
// the 8 sub-blocks of 16, zmm 1 elements 8-15), so that both zmm's lane L
// belongs to sub-block L / 2 and their vpdpbusd chain into one int32 vector
// (kLaneVecs 2): one cvt, vpermps and fma per 128 elements instead of per
// 64, for 4 vpermt2d per unit.
struct Q6K {
  static constexpr int kUnitBytes = sizeof(BlockQ6_K);
  static constexpr ActOrder kOrder = ActOrder::kPairs16;
  static constexpr int kLaneVecs = 2;
  static constexpr bool kPer16 = true;
  static constexpr float kSumScale = -32;
  static constexpr SlotTable kSlots = kPairs16Slots;
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(p);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
#pragma GCC unroll 16
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = _mm512_loadu_si512(b->ql + 64 * half);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * half)));
#pragma GCC unroll 16
      for (int hi_nibble = 0; hi_nibble < 2; ++hi_nibble) {
        // Rows r = 2*hi_nibble (first 32 bytes of ql) and r + 1 (last 32).
        const int r = 2 * hi_nibble;
        const __m512i low = _mm512_and_si512(hi_nibble ? _mm512_srli_epi16(ql, 4) : ql, m4);
        const __m512i cnt =
            _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * r)),
                               _mm256_set1_epi16(static_cast<int16_t>(2 * r + 2)), 1);
        const __m512i high = _mm512_and_si512(_mm512_srlv_epi16(qh, cnt), m2);
        u->codes[2 * half + hi_nibble] = _mm512_or_si512(low, _mm512_slli_epi16(high, 4));
      }
      const __m512i first = u->codes[2 * half], second = u->codes[2 * half + 1];
      u->codes[2 * half] = _mm512_permutex2var_epi32(first, Pairs16Index(0), second);
      u->codes[2 * half + 1] = _mm512_permutex2var_epi32(first, Pairs16Index(1), second);
    }
    const __m512 sc = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales))));
    u->wsc = _mm512_mul_ps(sc, _mm512_set1_ps(F16ToF32(b->d)));
  }
};

template <int NB>
void DotRow(const RowsTask& t, const uint8_t* row, int64_t b0, float* out) {
  const int64_t c = t.w.cols;
  const WeightType type = t.w.type;
  const QuantizedActs* a = t.acts + b0;
  const float* x = t.x + b0 * t.x_stride;
  switch (type) {
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
      return DotFloatAvx512<NB>(type, row, c, x, t.x_stride, out);
    case WeightType::kQ4_0:
      return DotQuantized<Q4_0, NB>(row, c, a, out);
    case WeightType::kQ4_1:
      return DotQuantized<Q4_1, NB>(row, c, a, out);
    case WeightType::kQ5_0:
      return DotQuantized<Q5_0, NB>(row, c, a, out);
    case WeightType::kQ5_1:
      return DotQuantized<Q5_1, NB>(row, c, a, out);
    case WeightType::kQ8_0:
      return DotQuantized<Q8_0, NB>(row, c, a, out);
    case WeightType::kQ4_K:
      return DotQuantized<Q45K<false>, NB>(row, c, a, out);
    case WeightType::kQ5_K:
      return DotQuantized<Q45K<true>, NB>(row, c, a, out);
    case WeightType::kQ6_K:
      return DotQuantized<Q6K, NB>(row, c, a, out);
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
      return DotLane16Avx512<NB>(type, row, c, a, out);
    case WeightType::kIQ4_NL:
      return DotQuantized<IQ4NL, NB>(row, c, a, out);
    case WeightType::kMXFP4:
      return DotQuantized<MXFP4, NB>(row, c, a, out);
    case WeightType::kIQ4_XS:
      return DotQuantized<IQ4XS, NB>(row, c, a, out);
    case WeightType::kIQ2_XXS:
    case WeightType::kIQ2_XS:
    case WeightType::kIQ2_S:
    case WeightType::kIQ3_XXS:
    case WeightType::kIQ3_S:
    case WeightType::kIQ1_S:
    case WeightType::kIQ1_M:
      return DotGridAvx512<NB>(type, row, c, a, out);
  }
}

// The grouped rows of a kInterleaved view: whole groups at once, the rows
// of a cut group one by one.
template <typename Dec>
void InterleavedRows(const RowsTask& t, int64_t begin, int64_t end) {
  auto rows = [&](int64_t b, int64_t e) {
    RunRowTiles(t, b, e, [&](auto nb, const uint8_t* row, int64_t b0, float* out) {
      DotQuantized<Dec, decltype(nb)::value>(row, t.w.cols, t.acts + b0, out,
                                             InterleavedUnitStride(t.w.type));
    });
  };
  if (t.batch > kGroupMaxBatch) return rows(begin, end);
  RunGroups(
      t, begin, end,
      [&](const uint8_t* group, const QuantizedActs& a, float* out) {
        DotQuantizedGroup<Dec>(group, t.w.cols, a, out);
      },
      rows);
}

// Rows [begin, end) of a kRows view against one activation vector, 4 at a
// time (rows4(row, out[4]): the 4 rows from `row` on), the last few one by
// one (row1(row, out)).
template <typename Rows4, typename Row1>
void RowQuads(const RowsTask& t, int64_t begin, int64_t end, Rows4 rows4, Row1 row1) {
  int64_t r = begin;
  for (; r + 4 <= end; r += 4) rows4(RowStart(t.w, r), t.y + r);
  for (; r < end; ++r) row1(RowStart(t.w, r), t.y + r);
}

// A decode step's plain rows of the quantized types, 4 to a call (see
// DotQuantizedRows4); false for the float types.
bool DecodeRowQuads(const RowsTask& t, int64_t begin, int64_t end) {
  const WeightType type = t.w.type;
  if (!UsesQuantizedActivations(type)) return false;  // The float types: t.acts is null.
  const int64_t stride = t.w.row_stride_bytes, cols = t.w.cols;
  const QuantizedActs& a = t.acts[0];
  auto run = [&](auto dec) {
    using Dec = decltype(dec);
    RowQuads(
        t, begin, end,
        [&](const uint8_t* row, float* out) { DotQuantizedRows4<Dec>(row, stride, cols, a, out); },
        [&](const uint8_t* row, float* out) { DotQuantized<Dec, 1>(row, cols, &a, out); });
    return true;
  };
  // The types whose loops live in the other files: their entry points.
  using Rows4Fn =
      void (*)(WeightType, const uint8_t*, int64_t, int64_t, const QuantizedActs&, float*);
  using Row1Fn = void (*)(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
  auto run_entries = [&](Rows4Fn rows4, Row1Fn row1) {
    RowQuads(
        t, begin, end,
        [&](const uint8_t* row, float* out) { rows4(type, row, stride, cols, a, out); },
        [&](const uint8_t* row, float* out) { row1(type, row, cols, &a, out); });
    return true;
  };
  switch (type) {
    case WeightType::kQ4_0:
      return run(Q4_0{});
    case WeightType::kQ4_1:
      return run(Q4_1{});
    case WeightType::kQ5_0:
      return run(Q5_0{});
    case WeightType::kQ5_1:
      return run(Q5_1{});
    case WeightType::kQ8_0:
      return run(Q8_0{});
    case WeightType::kQ4_K:
      return run(Q45K<false>{});
    case WeightType::kQ5_K:
      return run(Q45K<true>{});
    case WeightType::kQ6_K:
      return run(Q6K{});
    case WeightType::kIQ4_NL:
      return run(IQ4NL{});
    case WeightType::kMXFP4:
      return run(MXFP4{});
    case WeightType::kIQ4_XS:
      return run(IQ4XS{});
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
      return run_entries(&DotLane16Rows4Avx512, &DotLane16Avx512<1>);
    case WeightType::kIQ2_XXS:
    case WeightType::kIQ2_XS:
    case WeightType::kIQ2_S:
    case WeightType::kIQ3_XXS:
    case WeightType::kIQ3_S:
    case WeightType::kIQ1_S:
    case WeightType::kIQ1_M:
      return run_entries(&DotGridRows4Avx512, &DotGridAvx512<1>);
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
      return false;
  }
  return false;
}

void RowsAvx512(const RowsTask& t, int64_t begin, int64_t end) {
  SplitGroupedRows(
      t.w, begin, end,
      [&](int64_t b, int64_t e) {
        if (t.w.type == WeightType::kQ4_0) {
          if (t.w.layout == WeightLayout::kInterleavedLanes) {
            return InterleavedRows<LanesQ4_0>(t, b, e);
          }
          return InterleavedRows<InterleavedQ4_0>(t, b, e);
        }
        // IQ4_NL, IQ4_XS and MXFP4: kInterleavedLanes only.
        if (t.w.type == WeightType::kIQ4_NL) return InterleavedRows<LanesIQ4NL>(t, b, e);
        if (t.w.type == WeightType::kIQ4_XS) return InterleavedRows<LanesIQ4XS>(t, b, e);
        if (t.w.type == WeightType::kMXFP4) return InterleavedRows<LanesMXFP4>(t, b, e);
        if (t.w.layout == WeightLayout::kInterleavedLanes) {
          return InterleavedRows<InterleavedQ4K>(t, b, e);
        }
        if (t.w.type == WeightType::kQ4_K) return InterleavedRows<Q45K<false>>(t, b, e);
        InterleavedRows<InterleavedQ8_0>(t, b, e);
      },
      [&](int64_t b, int64_t e) {
        if (t.batch == 1 && DecodeRowQuads(t, b, e)) return;
        RunRowTiles(t, b, e, [&](auto nb, const uint8_t* row, int64_t b0, float* out) {
          DotRow<decltype(nb)::value>(t, row, b0, out);
        });
      });
}

}  // namespace
}  // namespace waste::kernels::internal::avx512

namespace waste::kernels::internal {

const IsaKernels& Avx512Kernels() {
  static constexpr IsaKernels kKernels = {&avx512::QuantizeActsAvx512, &avx512::RowsAvx512};
  return kKernels;
}

}  // namespace waste::kernels::internal
