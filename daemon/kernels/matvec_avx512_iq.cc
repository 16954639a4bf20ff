// The codebook types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
// on AVX-512: a decoder per type fills a Unit for DotQuantized
// (matvec_avx512_internal.h). The bit layouts are the ones iq_decode.h
// spells out per group; here a whole block is taken apart at once:
//   - the IQ2 and IQ3 codebooks are held packed, an entry's values as 2-bit
//     (IQ2: 8, 25, 43) or 3-bit (IQ3: 8 levels) level codes in 16 bits, as
//     two byte tables (low and high byte of each entry, 256 or 512 bytes).
//     64 indices (an IQ3 block; a pair of IQ2 blocks, DotQuantized's Load2)
//     look up each table with one vpermi2b per 128 entries and blends on the
//     index's bits 7 and 8; vpunpck{l,h}bw join the bytes into words. The
//     indices are gathered (one vpermb / vpermi2b) in the order that leaves
//     the entries of each 64 codes one per qword (two per qword for IQ3), so
//     one vpmultishiftqb moves each element's code to its byte and a vpermb
//     on a 64-byte table turns codes into values;
//   - IQ1's 2048-entry and IQ2_S's 1024-entry codebooks are too large for
//     that (IQ2_S's 16 windows measured ~15% slower): their entries are read
//     with vpgatherqq where this core gathers fast (Sapphire Rapids: ~1.5x
//     the loop), else with scalar-indexed 8-byte loads into xmm halves (an
//     earlier build measured gathers slower on its CPU; CodebookReads
//     decides per process), IQ1's
//     from a copy that holds each grid value g as the code of 8g + 1;
//   - signs are 64-bit masks per zmm (bit 8p + j: element j of piece p),
//     applied with one masked subtract. Sign bytes stored in the block are
//     loaded as masks; the 7-bit sign indices of IQ2_XXS, IQ2_XS and IQ3_XXS
//     become sign bytes through one vpermi2b on kIqSigns7, gathered so that
//     one vpshufbitqmb per zmm makes its mask (SignMask);
//   - scales stay in vector lanes: bit fields come out of their words with
//     vpmultishiftqb or shifts, d through a vector f16 conversion;
//   - IQ1's negative shifts (8g - 1) subtract 2 from the codes of a piece.
// Codes are int8 + 128 for vpdpbusd, with a scale per 16 or 32 elements, in
// natural order (kSumScale -128 folds the +128 back out).
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <initializer_list>

#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/iq_grids.h"
#include "daemon/kernels/matvec_avx512_internal.h"
#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels::internal::avx512 {
namespace {

// What the codebook decoders share. Their Load is forced inline: GCC left
// the larger ones (IQ1, IQ3) as calls, the Unit going through memory, at up
// to a third of their speed. A type with a scale per 32 elements
// (kPer32) fills Unit::wsc with [scale x8 | coefficient of s32 x8] (the
// scale again for codes + 128: kSumScale), one with a scale per 16 the 16
// scales.
// Their Load makes the codes in natural order, which the loops re-pair
// (kPairAfterLoad, PairCodes: 4 permutes per unit) so that two zmm of
// products chain into one vector of lanes: in cache, Zen 5, a tile of 4
// activation vectors (prefill, batched sessions) +7 % (IQ1_S) to +20 %
// (IQ2_XS), batch 1 0 to -5 % (the permutes cost more than one vector's
// saved cvt, vpermps and fma). Taken for the prefill of the streamed huge
// models these types are for, whose decode waits on the disk.
template <WeightType kType, bool kPer32 = false>
struct GridDecoder {
  static constexpr int kUnitBytes = GetWeightTypeInfo(kType).block_bytes;
  static constexpr ActOrder kOrder = kPer32 ? ActOrder::kHalves32 : ActOrder::kPairs16;
  static constexpr bool kPairAfterLoad = true;
  static constexpr int kLaneVecs = 2;
  static constexpr bool kPer16 = !kPer32;
  static constexpr float kSumScale = -128;
  static constexpr SlotTable kSlots = kPer32 ? kHalves32Slots : kPairs16Slots;
};

// [v | v]: a per-32 type's weight scales as Unit::wsc.
[[gnu::always_inline]] inline __m512 Twice(__m256 v) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(v), v, 1);
}

// 7-bit sign indices (low 7 bits of each byte) to sign bytes.
[[gnu::always_inline]] inline __m512i SignBytes7(__m512i idx7) {
  return _mm512_permutex2var_epi8(_mm512_loadu_si512(kIqSigns7.data()), idx7,
                                  _mm512_loadu_si512(kIqSigns7.data() + 64));
}

// Sign bytes in piece-major order for SignMask: piece 8z + i's byte at
// 8i + z, so that the pieces of one zmm of codes share a byte position.
constexpr int SignByte(int piece) { return 8 * (piece % 8) + piece / 8; }

// The negative elements of 64z .. 64z+63 (bit 8i + j: element j of piece
// 8z + i) from sign bytes in SignByte order: one vpshufbitqmb, where moving
// each 64-bit mask out through memory or a general register cost a long
// dependency chain.
[[gnu::always_inline]] inline __mmask64 SignMask(__m512i signs, int z) {
  return _mm512_bitshuffle_epi64_mask(
      signs, _mm512_set1_epi64(static_cast<int64_t>(0x0706050403020100 + 0x0808080808080808 * z)));
}

// [w x8 | w x8] for a type with a scale per 32 whose group g has the scale s
// in the top nibble of dword `dword_of_group`[g] of `words`: w = (2s + 1) *
// d * mult, the f16 d at `d`. All in vector lanes: a scalar f16 and the
// narrowing of the nibbles made a long chain per block.
[[gnu::always_inline]] inline __m512 TopNibbleScales(__m512i words, __m512i dword_of_group,
                                                     const uint8_t* d, float mult) {
  // Bit 27 is not the scale's, but | 1 sets bit 0 either way.
  const __m512i odd = _mm512_or_si512(
      _mm512_srli_epi32(_mm512_permutexvar_epi32(dword_of_group, words), 27), _mm512_set1_epi32(1));
  const __m512 dm = _mm512_mul_ps(
      _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<int16_t>(LoadU16(d)))), _mm512_set1_ps(mult));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(odd), dm);
}

// (2s + 1) * mult for 8 or 16 small integer scale codes s.
[[gnu::always_inline]] inline __m256 OddScales8(__m256i s, float mult) {
  return _mm256_mul_ps(
      _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(s, 1), _mm256_set1_epi32(1))),
      _mm256_set1_ps(mult));
}
[[gnu::always_inline]] inline __m512 OddScales16(__m512i s, float mult) {
  return _mm512_mul_ps(
      _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(1))),
      _mm512_set1_ps(mult));
}

// vpmultishiftqb's control that puts nibble `nibble`[l] of a 64-bit word,
// shifted left by 1, in the low byte of lane l (with the bit below it).
constexpr std::array<int32_t, 16> NibbleControl(std::array<int32_t, 16> nibble) {
  std::array<int32_t, 16> t{};
  for (int l = 0; l < 16; ++l) t[l] = (4 * nibble[l] + 63) % 64;
  return t;
}

// (2s + 1) * mult * d (mult a power of 2: the same to the bit as (2s + 1) *
// (d * mult)) for the nibbles s of `word` that `control` (NibbleControl)
// picks, the f16 d at `d`; all in vector lanes.
[[gnu::always_inline]] inline __m512 OddNibbleScales(uint64_t word,
                                                     const std::array<int32_t, 16>& control,
                                                     const uint8_t* d, float mult) {
  const __m512i x = _mm512_multishift_epi64_epi8(_mm512_loadu_si512(control.data()),
                                                 _mm512_set1_epi64(static_cast<int64_t>(word)));
  // (x & 0x1E) | 1: 2s + 1.
  const __m512i odd =
      _mm512_ternarylogic_epi32(x, _mm512_set1_epi32(0x1E), _mm512_set1_epi32(1), 0xEA);
  const __m512 dm = _mm512_mul_ps(
      _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<int16_t>(LoadU16(d)))), _mm512_set1_ps(mult));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(odd), dm);
}

// IQ2_XS / IQ2_S scales: the two nibbles of 8 bytes, one per 16 elements
// (nibble k for elements 16k ..), block d at `d`.
[[gnu::always_inline]] inline __m512 Iq2Scales(const uint8_t* scales, const uint8_t* d) {
  alignas(64) static constexpr std::array<int32_t, 16> kControl =
      NibbleControl({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  return OddNibbleScales(LoadU64(scales), kControl, d, 0.125f);
}

// An IQ2 (8 values, 2 bits each) or IQ3 (4 values, 3 bits each) codebook
// packed into words of level codes: entry i's element e is `levels`[code] for
// the code at bits (2 or 3) * e of word i.
template <typename T, size_t N>
std::array<uint16_t, N> PackGrid(const T (&grid)[N], std::initializer_list<int> levels) {
  constexpr int kElems = sizeof(T);
  constexpr int kBits = kElems == 8 ? 2 : 3;
  std::array<uint16_t, N> packed{};
  for (size_t i = 0; i < N; ++i) {
    for (int e = 0; e < kElems; ++e) {
      const int value = static_cast<int>((uint64_t{grid[i]} >> (8 * e)) & 0xFF);
      int code = 0;
      for (int level : levels) {
        if (level == value) break;
        ++code;
      }
      packed[i] |= static_cast<uint16_t>(code << (kBits * e));
    }
  }
  return packed;
}

constexpr std::initializer_list<int> kIq2Levels = {8, 25, 43};
constexpr std::initializer_list<int> kIq3XxsLevels = {4, 12, 20, 28, 36, 44, 52, 62};
constexpr std::initializer_list<int> kIq3SLevels = {1, 3, 5, 7, 9, 11, 13, 15};

// The grids are constant-initialized, so they are there before these.
alignas(64) const std::array<uint16_t, 256> kIq2XxsPacked = PackGrid(kIq2XxsGrid, kIq2Levels);
alignas(64) const std::array<uint16_t, 512> kIq2XsPacked = PackGrid(kIq2XsGrid, kIq2Levels);
alignas(64) const std::array<uint16_t, 256> kIq3XxsPacked = PackGrid(kIq3XxsGrid, kIq3XxsLevels);
alignas(64) const std::array<uint16_t, 512> kIq3SPacked = PackGrid(kIq3SGrid, kIq3SLevels);

// Byte b (0: bits 0-7, 1: bits 8-15) of each word of a packed codebook: the
// codebooks are looked up a byte at a time, 64 indices per vpermi2b.
template <size_t N>
std::array<uint8_t, N> BytesOf(const std::array<uint16_t, N>& packed, int b) {
  std::array<uint8_t, N> t{};
  for (size_t i = 0; i < N; ++i) t[i] = static_cast<uint8_t>(packed[i] >> (8 * b));
  return t;
}
alignas(64) const std::array<uint8_t, 256> kIq2XxsLow = BytesOf(kIq2XxsPacked, 0);
alignas(64) const std::array<uint8_t, 256> kIq2XxsHigh = BytesOf(kIq2XxsPacked, 1);
alignas(64) const std::array<uint8_t, 512> kIq2XsLow = BytesOf(kIq2XsPacked, 0);
alignas(64) const std::array<uint8_t, 512> kIq2XsHigh = BytesOf(kIq2XsPacked, 1);
alignas(64) const std::array<uint8_t, 256> kIq3XxsLow = BytesOf(kIq3XxsPacked, 0);
alignas(64) const std::array<uint8_t, 256> kIq3XxsHigh = BytesOf(kIq3XxsPacked, 1);
alignas(64) const std::array<uint8_t, 512> kIq3SLow = BytesOf(kIq3SPacked, 0);
alignas(64) const std::array<uint8_t, 512> kIq3SHigh = BytesOf(kIq3SPacked, 1);

// vpermb's table from a byte whose low bits are a level code to the level +
// 128 (vpdpbusd's unsigned operand); `levels` has 3 or 8 entries.
constexpr std::array<uint8_t, 64> LevelTable(std::initializer_list<int> levels) {
  std::array<uint8_t, 64> t{};
  const int n = levels.size() > 4 ? 8 : 4;
  for (int b = 0; b < 64; ++b) {
    const int code = b % n;
    t[b] = static_cast<uint8_t>(
        (code < static_cast<int>(levels.size()) ? levels.begin()[code] : 0) + 128);
  }
  return t;
}
alignas(64) constexpr std::array<uint8_t, 64> kIq2Table = LevelTable(kIq2Levels);
alignas(64) constexpr std::array<uint8_t, 64> kIq3XxsTable = LevelTable(kIq3XxsLevels);
alignas(64) constexpr std::array<uint8_t, 64> kIq3STable = LevelTable(kIq3SLevels);

// table[idx] for 64 byte indices (< kEntries): one vpermi2b per 128 entries,
// then blends on the index's bit 7 (`bit7`) and bit 8 (`bit8`, per byte).
// Per 16 bits of entries, half the permutes and masks of a vpermi2w per 64
// words (32 indices) and blends.
template <size_t kEntries>
[[gnu::always_inline]] inline __m512i Lookup64(const std::array<uint8_t, kEntries>& table,
                                               __m512i idx, __mmask64 bit7, __mmask64 bit8) {
  static_assert(kEntries == 256 || kEntries == 512);
  __m512i r[kEntries / 128];
#pragma GCC unroll 4
  for (size_t w = 0; w < kEntries / 128; ++w) {
    r[w] = _mm512_permutex2var_epi8(_mm512_load_si512(table.data() + 128 * w), idx,
                                    _mm512_load_si512(table.data() + 128 * w + 64));
  }
  r[0] = _mm512_mask_blend_epi8(bit7, r[0], r[1]);
  if constexpr (kEntries == 512) {
    r[2] = _mm512_mask_blend_epi8(bit7, r[2], r[3]);
    r[0] = _mm512_mask_blend_epi8(bit8, r[0], r[2]);
  }
  return r[0];
}

// Piece 8z + i of an IQ2 block goes to word 4i + z of its lookup: the
// entries of the 8 pieces that ExpandIq2 spreads over one zmm then sit one
// per qword already, so no permute stands between lookup and vpmultishiftqb.
constexpr int Iq2Word(int piece) { return 4 * (piece % 8) + piece / 8; }

// Codes (+ 128) of elements 64z .. 64z+63 from an IQ2 block's 32 packed
// entries in Iq2Word order, negated where `negative` has a bit.
[[gnu::always_inline]] inline __m512i ExpandIq2(__m512i entries, int z, __mmask64 negative) {
  // Byte j of qword i: the code at bits 2j of word z (entry 8z + i).
  const __m512i codes = _mm512_multishift_epi64_epi8(
      _mm512_set1_epi64(static_cast<int64_t>(0x0E0C0A0806040200 + 0x1010101010101010 * z)),
      entries);
  const __m512i v = _mm512_permutexvar_epi8(codes, _mm512_load_si512(kIq2Table.data()));
  return _mm512_mask_sub_epi8(v, negative, _mm512_setzero_si512(), v);
}

// A pair of IQ2 blocks is looked up a byte at a time, as IQ3: piece k of
// block b at byte Iq2PairByte(b, k) of the lookup comes out as word
// Iq2Word(k) of ByteLookupEntries' entries[b]. Its sign byte goes to
// Iq2PairSignByte(b, k), for SignMask(signs, 4b + z).
constexpr int Iq2PairByte(int b, int k) {
  const int w = Iq2Word(k);
  return 16 * (w / 8) + 8 * b + w % 8;
}
constexpr int Iq2PairSignByte(int b, int k) { return 8 * (k % 8) + 4 * b + k / 8; }

// vpermi2b's control that takes, for each piece k of block b (at byte
// `byte(b, k)`), byte `source(k)` of block b's 64 bytes.
template <typename Place, typename Source>
constexpr std::array<uint8_t, 64> PairBytes(Place byte, Source source) {
  std::array<uint8_t, 64> t{};
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 32; ++k) t[byte(b, k)] = static_cast<uint8_t>(64 * b + source(k));
  return t;
}

// IQ3's 64 entries of 4 elements go to words of two lookups so that qword i
// of lookup z / 2 holds entries 16z + 2i, 16z + 2i + 1 (the 8 elements of
// piece 4z + i) in words 2 (z % 2), 2 (z % 2) + 1: entry e's lookup and word.
constexpr int Iq3Lookup(int e) { return e / 32; }
constexpr int Iq3Word(int e) { return 4 * (e % 16 / 2) + 2 * (e / 16 % 2) + e % 2; }

// Where entry e sits among the 64 bytes of a Lookup64 such that the low and
// high bytes, interleaved by vpunpck{l,h}bw (per 128 bits: bytes 0-7 to
// words 0-7 of the low unpack, bytes 8-15 to those of the high), come out as
// the words of lookups 0 and 1 in Iq3Word order.
constexpr int Iq3Byte(int e) {
  const int w = Iq3Word(e);
  return 16 * (w / 8) + 8 * Iq3Lookup(e) + w % 8;
}

// Entry (the index of its byte in the block) at each Iq3Byte position.
alignas(64) constexpr std::array<uint8_t, 64> kIq3Entries = [] {
  std::array<uint8_t, 64> t{};
  for (int e = 0; e < 64; ++e) t[Iq3Byte(e)] = static_cast<uint8_t>(e);
  return t;
}();

// The packed entries of 64 indices, bytes in the order of Iq3Byte (IQ3) or
// Iq2PairByte (a pair of IQ2 blocks); bit 8 of the index (IQ3_S) in `bit8`:
// the first 32 in entries[0], the other 32 in entries[1].
template <size_t kEntries>
[[gnu::always_inline]] inline void ByteLookupEntries(const std::array<uint8_t, kEntries>& low,
                                                     const std::array<uint8_t, kEntries>& high,
                                                     __m512i idx, __mmask64 bit8,
                                                     __m512i entries[2]) {
  const __mmask64 bit7 = _mm512_movepi8_mask(idx);
  const __m512i lo = Lookup64(low, idx, bit7, bit8);
  const __m512i hi = Lookup64(high, idx, bit7, bit8);
  entries[0] = _mm512_unpacklo_epi8(lo, hi);
  entries[1] = _mm512_unpackhi_epi8(lo, hi);
}

// As ExpandIq2 for IQ3's entries in Iq3Word order and its level table.
[[gnu::always_inline]] inline __m512i ExpandIq3(const __m512i entries[2], int z, __mmask64 negative,
                                                const std::array<uint8_t, 64>& table) {
  // Bytes 0-3: the codes at bits 3e of word 2 (z % 2); bytes 4-7 of the next.
  const __m512i codes = _mm512_multishift_epi64_epi8(
      _mm512_set1_epi64(static_cast<int64_t>(0x1916131009060300 + 0x2020202020202020 * (z % 2))),
      entries[z / 2]);
  const __m512i v = _mm512_permutexvar_epi8(codes, _mm512_load_si512(table.data()));
  return _mm512_mask_sub_epi8(v, negative, _mm512_setzero_si512(), v);
}

// The entries of a codebook too large for registers (IQ1's 2048; IQ2_S's
// 1024, where 16 vpermi2w windows measured slower), 8 pieces at a time,
// from the pieces' indices in the 16-bit lanes of idx: either one
// vpgatherqq per 8 (kGather) or scalar-indexed 8-byte loads into xmm
// halves, the indices read from memory as whole words (GCC's own extraction
// of each 32-bit lane, vpextrd and valignd, cost more). CodebookReads says
// which; grid_gathers below.
template <bool kGather>
class CodebookEntries {
 public:
  [[gnu::always_inline]] explicit CodebookEntries(__m512i idx) {
    if constexpr (kGather) {
      // (Immediates spelled out: an unoptimized build does not fold z.)
      idx64_[0] = _mm512_cvtepu16_epi64(_mm512_castsi512_si128(idx));
      idx64_[1] = _mm512_cvtepu16_epi64(_mm512_extracti32x4_epi32(idx, 1));
      idx64_[2] = _mm512_cvtepu16_epi64(_mm512_extracti32x4_epi32(idx, 2));
      idx64_[3] = _mm512_cvtepu16_epi64(_mm512_extracti32x4_epi32(idx, 3));
    } else {
      _mm512_store_si512(words_, idx);
    }
  }
  // The entries of pieces 8z .. 8z + 7.
  [[gnu::always_inline]] __m512i Get(const uint64_t* table, int z) const {
    if constexpr (kGather) {
      return _mm512_i64gather_epi64(idx64_[z], table, 8);
    } else {
      const uint64_t* w = words_ + 2 * z;
      const __m256i lo = _mm256_set_m128i(Entries2(table, w[0] >> 32), Entries2(table, w[0]));
      const __m256i hi = _mm256_set_m128i(Entries2(table, w[1] >> 32), Entries2(table, w[1]));
      return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
  }

 private:
  [[gnu::always_inline]] static __m128i Entries2(const uint64_t* table, uint64_t w) {
    const __m128d lo =
        _mm_castsi128_pd(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(table + (w & 0xFFFF))));
    return _mm_castpd_si128(
        _mm_loadh_pd(lo, reinterpret_cast<const double*>(table + ((w >> 16) & 0xFFFF))));
  }

  __m512i idx64_[kGather ? 4 : 1];  // kGather: the indices of pieces 8z .. as qwords.
  alignas(64) uint64_t words_[kGather ? 1 : 8];
};

// Per group (one 64-bit lane: 4 index bytes, then a word of four 7-bit sign
// indices and the scale in bits 28-31).
struct Iq2Xxs : GridDecoder<WeightType::kIQ2_XXS, true> {
  // A lone unit (the last of an odd count) as the first of a pair with itself.
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    Unit pair[2];
    Load2(p, 0, pair);
    *u = pair[0];
  }

  // Two blocks: their 64 index bytes in one Lookup64 per byte of the entries.
  [[gnu::always_inline]] static void Load2(const uint8_t* p, int64_t stride, Unit* u) {
    const __m512i q[2] = {_mm512_loadu_si512(p + 2), _mm512_loadu_si512(p + stride + 2)};
    // Piece k's index byte is byte k % 4 of group k / 4.
    constexpr auto kIndexByte = [](int k) { return 8 * (k / 4) + k % 4; };
    alignas(64) static constexpr std::array<uint8_t, 64> kIndices =
        PairBytes(Iq2PairByte, kIndexByte);
    __m512i entries[2];
    ByteLookupEntries(kIq2XxsLow, kIq2XxsHigh,
                      _mm512_permutex2var_epi8(q[0], _mm512_load_si512(kIndices.data()), q[1]), 0,
                      entries);
    const __m512i fields0 = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x352E2720), q[0]);
    const __m512i fields1 = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x352E2720), q[1]);
    alignas(64) static constexpr std::array<uint8_t, 64> kSignFields =
        PairBytes(Iq2PairSignByte, kIndexByte);
    const __m512i signs = SignBytes7(
        _mm512_permutex2var_epi8(fields0, _mm512_load_si512(kSignFields.data()), fields1));
#pragma GCC unroll 2
    for (int b = 0; b < 2; ++b) {
#pragma GCC unroll 4
      for (int z = 0; z < 4; ++z) {
        u[b].codes[z] = ExpandIq2(entries[b], z, SignMask(signs, 4 * b + z));
      }
      u[b].wsc = Scales(q[b], p + b * stride);
    }
  }

  [[gnu::always_inline]] static __m512 Scales(__m512i q, const uint8_t* p) {
    return TopNibbleScales(
        q, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 1, 3, 5, 7, 9, 11, 13, 15), p, 0.125f);
  }
};

// qs[i]: 9-bit index, 7-bit sign index above it.
struct Iq2Xs : GridDecoder<WeightType::kIQ2_XS> {
  // A lone unit (the last of an odd count) as the first of a pair with itself.
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    Unit pair[2];
    Load2(p, 0, pair);
    *u = pair[0];
  }

  // Two blocks: the low bytes of their 64 words index one Lookup64 per byte
  // of the entries; bit 0 of the high bytes is bit 8 of the index.
  [[gnu::always_inline]] static void Load2(const uint8_t* p, int64_t stride, Unit* u) {
    const __m512i q0 = _mm512_loadu_si512(p + 2), q1 = _mm512_loadu_si512(p + stride + 2);
    constexpr auto kLowByte = [](int k) { return 2 * k; };
    constexpr auto kHighByte = [](int k) { return 2 * k + 1; };
    alignas(64) static constexpr std::array<uint8_t, 64> kLow = PairBytes(Iq2PairByte, kLowByte);
    alignas(64) static constexpr std::array<uint8_t, 64> kHigh = PairBytes(Iq2PairByte, kHighByte);
    alignas(64) static constexpr std::array<uint8_t, 64> kSigns =
        PairBytes(Iq2PairSignByte, kHighByte);
    const __m512i high = _mm512_permutex2var_epi8(q0, _mm512_load_si512(kHigh.data()), q1);
    __m512i entries[2];
    ByteLookupEntries(kIq2XsLow, kIq2XsHigh,
                      _mm512_permutex2var_epi8(q0, _mm512_load_si512(kLow.data()), q1),
                      _mm512_test_epi8_mask(high, _mm512_set1_epi8(1)), entries);
    // High byte >> 1: the sign index (and in bit 7 a bit vpermi2b ignores).
    const __m512i signs = SignBytes7(
        _mm512_srli_epi16(_mm512_permutex2var_epi8(q0, _mm512_load_si512(kSigns.data()), q1), 1));
#pragma GCC unroll 2
    for (int b = 0; b < 2; ++b) {
#pragma GCC unroll 4
      for (int z = 0; z < 4; ++z) {
        u[b].codes[z] = ExpandIq2(entries[b], z, SignMask(signs, 4 * b + z));
      }
      const uint8_t* block = p + b * stride;
      u[b].wsc = Iq2Scales(block + offsetof(BlockIQ2_XS, scales), block);
    }
  }
};

// Piece i: index qs[i] plus bits 2i, 2i+1 of qh (as one u64) above it; sign
// bytes as they are.
template <bool kGather>
struct Iq2S : GridDecoder<WeightType::kIQ2_S> {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const __m512i low =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)));
    // Word i: qh[i / 4] in its high byte, shifted right by 2 (i % 4).
    alignas(64) static constexpr std::array<uint8_t, 64> kQhHigh = [] {
      std::array<uint8_t, 64> t{};
      for (int i = 0; i < 32; ++i) t[2 * i + 1] = static_cast<uint8_t>(i / 4);
      return t;
    }();
    const __m512i qh = _mm512_maskz_permutexvar_epi8(
        0xAAAAAAAAAAAAAAAA, _mm512_load_si512(kQhHigh.data()),
        _mm512_castsi128_si512(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + offsetof(BlockIQ2_S, qh)))));
    const __m512i shifts = _mm512_setr_epi64(
        0x0006000400020000, 0x0006000400020000, 0x0006000400020000, 0x0006000400020000,
        0x0006000400020000, 0x0006000400020000, 0x0006000400020000, 0x0006000400020000);
    const __m512i idx = _mm512_or_si512(
        low, _mm512_and_si512(_mm512_srlv_epi16(qh, shifts), _mm512_set1_epi16(0x300)));
    const CodebookEntries<kGather> entries(idx);
    const uint8_t* signs = p + 2 + kQK_K / 8;
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      // Grid values are < 128: + 128 is setting the top bit.
      const __m512i v = _mm512_or_si512(entries.Get(kIq2SGrid, z), _mm512_set1_epi8(-128));
      u->codes[z] = _mm512_mask_sub_epi8(v, _cvtu64_mask64(LoadU64(signs + 8 * z)),
                                         _mm512_setzero_si512(), v);
    }
    u->wsc = Iq2Scales(p + offsetof(BlockIQ2_S, scales), p);
  }
};

// 64 8-bit indices of 4-value entries; per group a word of four 7-bit sign
// indices and the scale (bits 28-31).
struct Iq3Xxs : GridDecoder<WeightType::kIQ3_XXS, true> {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const uint8_t* qs = p + 2;
    const __m512i indices = _mm512_loadu_si512(qs);
    const __m512i aux = _mm512_castsi256_si512(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + kQK_K / 4)));
    // Byte 4g + l (piece 4g + l): bits 7l .. of group g's word (its sign
    // index, and a bit that vpermi2b ignores).
    const __m512i fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x352E2720150E0700), aux);
    alignas(64) static constexpr std::array<uint8_t, 64> kSignPieces = [] {
      std::array<uint8_t, 64> t{};
      for (int k = 0; k < 32; ++k) t[SignByte(k)] = static_cast<uint8_t>(k);
      return t;
    }();
    const __m512i signs =
        SignBytes7(_mm512_permutexvar_epi8(_mm512_load_si512(kSignPieces.data()), fields));
    __m512i entries[2];
    ByteLookupEntries(kIq3XxsLow, kIq3XxsHigh,
                      _mm512_permutexvar_epi8(_mm512_load_si512(kIq3Entries.data()), indices), 0,
                      entries);
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      u->codes[z] = ExpandIq3(entries, z, SignMask(signs, z), kIq3XxsTable);
    }
    u->wsc = TopNibbleScales(aux, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7),
                             p, 0.25f);
  }
};

// Entry k: index qs[k] plus bit k of qh (as one u64) as bit 8; sign bytes as
// they are; a nibble scale per group.
struct Iq3S : GridDecoder<WeightType::kIQ3_S, true> {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const uint8_t* qs = p + offsetof(BlockIQ3_S, qs);
    const uint64_t qh = LoadU64(p + offsetof(BlockIQ3_S, qh));
    const uint8_t* signs = p + offsetof(BlockIQ3_S, signs);
    const __m512i entries_bytes = _mm512_load_si512(kIq3Entries.data());
    // Bit 8 of entry e's index is bit e of qh.
    const __mmask64 bit8 =
        _mm512_bitshuffle_epi64_mask(_mm512_set1_epi64(static_cast<int64_t>(qh)), entries_bytes);
    __m512i entries[2];
    ByteLookupEntries(kIq3SLow, kIq3SHigh,
                      _mm512_permutexvar_epi8(entries_bytes, _mm512_loadu_si512(qs)), bit8,
                      entries);
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) {
      u->codes[z] = ExpandIq3(entries, z, _cvtu64_mask64(LoadU64(signs + 8 * z)), kIq3STable);
    }
    // Nibble g of the scale bytes for group g, in lanes g and 8 + g.
    alignas(64) static constexpr std::array<int32_t, 16> kControl =
        NibbleControl({0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7});
    u->wsc = OddNibbleScales(LoadU32(p + offsetof(BlockIQ3_S, scales)), kControl, p, 1.0f);
  }
};

// IQ1's codebook with its grid bytes g (-1, 0, 1) as the codes of 8g + 1,
// + 128 (121, 129, 137): a negative shift (8g - 1) is 2 less in every byte,
// one 64-bit subtract per entry that never borrows across bytes.
const std::array<uint64_t, 2048> kIq1Codes = Iq1ByteTable(8, 1 + 128);

// A block's codes (+ 128) from its 32 piece indices (16-bit lanes, piece p
// in lane p) and the pieces whose shift is negative (bit p).
template <bool kGather>
[[gnu::always_inline]] inline void Iq1Units(__m512i idx, uint32_t negative, Unit* u) {
  const CodebookEntries<kGather> entries(idx);
#pragma GCC unroll 4
  for (int z = 0; z < 4; ++z) {
    const __m512i codes = entries.Get(kIq1Codes.data(), z);
    u->codes[z] = _mm512_mask_sub_epi64(codes, static_cast<__mmask8>(negative >> (8 * z)), codes,
                                        _mm512_set1_epi8(2));
  }
}

// Piece i: index qs[i] plus bits 3 (i % 4) .. +2 of qh[i / 4] as bits 8-10;
// qh[g] bits 12-14 are group g's scale, bit 15 its shift's sign.
template <bool kGather>
struct Iq1S : GridDecoder<WeightType::kIQ1_S, true> {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const auto* b = reinterpret_cast<const BlockIQ1_S*>(p);
    const float d = F16ToF32(LoadU16(p));
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qh));
    // Word i: qh[i / 4] >> 3 (i % 4).
    alignas(64) static constexpr std::array<uint16_t, 32> kGroupOf = [] {
      std::array<uint16_t, 32> t{};
      for (int i = 0; i < 32; ++i) t[i] = static_cast<uint16_t>(i / 4);
      return t;
    }();
    const __m512i qhw =
        _mm512_permutexvar_epi16(_mm512_load_si512(kGroupOf.data()), _mm512_castsi128_si512(qh));
    const __m512i high = _mm512_srlv_epi16(qhw, _mm512_set1_epi64(0x0009000600030000));
    const __m512i idx = _mm512_or_si512(
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs))),
        _mm512_and_si512(_mm512_slli_epi16(high, 8), _mm512_set1_epi16(0x700)));
    Iq1Units<kGather>(idx, _mm512_movepi16_mask(qhw), u);
    const __m256i sc =
        _mm256_and_si256(_mm256_srli_epi32(_mm256_cvtepu16_epi32(qh), 12), _mm256_set1_epi32(7));
    u->wsc = Twice(OddScales8(sc, d * 0.125f));
  }
};

// Piece i: index qs[i] plus nibble i of qh (low nibble first): bits 0-2
// above the index, bit 3 the shift's sign. Scales: 3 bits per 16
// elements, element group k at bits 3 (k % 4) of scale word k / 4, whose
// top nibbles make up the f16 d.
template <bool kGather>
struct Iq1M : GridDecoder<WeightType::kIQ1_M> {
  [[gnu::always_inline]] static void Load(const uint8_t* p, Unit* u) {
    const auto* b = reinterpret_cast<const BlockIQ1_M*>(p);
    uint16_t sc[4];
    for (int i = 0; i < 4; ++i) sc[i] = LoadU16(b->scales + 2 * i);
    const float d = F16ToF32(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                   ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000)));
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qh));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(qh, m4), hi = _mm_and_si128(_mm_srli_epi16(qh, 4), m4);
    const __m256i nibbles = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
    const __m512i idx = _mm512_or_si512(
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs))),
        _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm256_and_si256(nibbles, _mm256_set1_epi8(7))), 8));
    Iq1Units<kGather>(idx, _mm256_test_epi8_mask(nibbles, _mm256_set1_epi8(8)), u);
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

// Reads 4 x 8 entries of IQ1's codebook per index vector, the kGather way
// (grid_gathers' probe).
template <bool kGather>
[[gnu::noinline]] __m512i CodebookReadProbe(const __m512i* idx, int count) {
  __m512i sum = _mm512_setzero_si512();
  for (int i = 0; i < count; ++i) {
    const CodebookEntries<kGather> entries(idx[i]);
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) sum = _mm512_add_epi64(sum, entries.Get(kIq1Codes.data(), z));
  }
  return sum;
}

// grid_gathers' reads for IQ1_S, IQ1_M and IQ2_S: 8192 random
// entries of IQ1's codebook (16 KiB, in L1). Sapphire Rapids, in cache, ns
// per 256 weights: IQ1_S 21.5 -> 14.7 with gathers, IQ1_M 23.9 -> 17.2,
// IQ2_S 22.0 -> 14.5.
void ReadCodebookForProbe(bool gather) {
  alignas(64) static uint16_t raw[8192];
  static const bool filled = (ProbeIndices(raw, 8192, 11), true);
  (void)filled;
  const __m512i* idx = reinterpret_cast<const __m512i*>(raw);
  constexpr int kCount = 8192 / 32;
  const __m512i sum =
      gather ? CodebookReadProbe<true>(idx, kCount) : CodebookReadProbe<false>(idx, kCount);
  asm volatile("" : : "v"(sum));  // The reads are used.
}

// Whether this library's codebook loops gather (CodebookReads).
constinit CodebookGatherChoice grid_gathers(&ReadCodebookForProbe);

}  // namespace

template <int NB>
void DotGridAvx512(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
                   float* out) {
  switch (type) {
    case WeightType::kIQ2_XXS:
      return DotQuantized<Iq2Xxs, NB>(row, cols, acts, out);
    case WeightType::kIQ2_XS:
      return DotQuantized<Iq2Xs, NB>(row, cols, acts, out);
    case WeightType::kIQ2_S:
      return grid_gathers.Gathers() ? DotQuantized<Iq2S<true>, NB>(row, cols, acts, out)
                                    : DotQuantized<Iq2S<false>, NB>(row, cols, acts, out);
    case WeightType::kIQ3_XXS:
      return DotQuantized<Iq3Xxs, NB>(row, cols, acts, out);
    case WeightType::kIQ3_S:
      return DotQuantized<Iq3S, NB>(row, cols, acts, out);
    case WeightType::kIQ1_S:
      return grid_gathers.Gathers() ? DotQuantized<Iq1S<true>, NB>(row, cols, acts, out)
                                    : DotQuantized<Iq1S<false>, NB>(row, cols, acts, out);
    case WeightType::kIQ1_M:
      return grid_gathers.Gathers() ? DotQuantized<Iq1M<true>, NB>(row, cols, acts, out)
                                    : DotQuantized<Iq1M<false>, NB>(row, cols, acts, out);
    default:
      break;
  }
}

void DotGridRows4Avx512(WeightType type, const uint8_t* row0, int64_t row_stride, int64_t cols,
                        const QuantizedActs& a, float* out) {
  auto rows = [&](auto dec) { DotQuantizedRows4<decltype(dec)>(row0, row_stride, cols, a, out); };
  switch (type) {
    case WeightType::kIQ2_XXS:
      return rows(Iq2Xxs{});
    case WeightType::kIQ2_XS:
      return rows(Iq2Xs{});
    case WeightType::kIQ2_S:
      return grid_gathers.Gathers() ? rows(Iq2S<true>{}) : rows(Iq2S<false>{});
    case WeightType::kIQ3_XXS:
      return rows(Iq3Xxs{});
    case WeightType::kIQ3_S:
      // Row by row: its loop inside DotQuantizedRows4 ran 6 % slower on
      // rows of 4096 and more (in cache, Zen 5).
      for (int r = 0; r < 4; ++r) DotQuantized<Iq3S, 1>(row0 + r * row_stride, cols, &a, out + r);
      return;
    case WeightType::kIQ1_S:
      return grid_gathers.Gathers() ? rows(Iq1S<true>{}) : rows(Iq1S<false>{});
    case WeightType::kIQ1_M:
      return grid_gathers.Gathers() ? rows(Iq1M<true>{}) : rows(Iq1M<false>{});
    default:
      break;
  }
}

template void DotGridAvx512<1>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotGridAvx512<2>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotGridAvx512<3>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotGridAvx512<4>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);

}  // namespace waste::kernels::internal::avx512
