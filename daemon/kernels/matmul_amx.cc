// The matrix-unit loops (AMX-INT8: Sapphire Rapids and later Xeons), for
// ProductPath::kMatrix. Compiled with AVX512_COPTS and the AMX flags; run only
// where MatrixUnitAvailable().
//
// tdpbssd multiplies a tile of 16 rows x 64 int8 by one of 64 x 16 (stored as
// 16 rows of 4-byte groups, "VNNI order") into 16 x 16 int32 sums in one
// instruction. A quantized type's sums must be scaled per 32-element block,
// so each product covers one block (16 weight rows x 32 bytes of their
// codes, loaded straight from the rows with the row stride, by 32 bytes of
// 16 activation vectors from PrepareActs' tiles), and an AVX-512 epilogue
// scales the 16 x 16 sums into f32 accumulators, block after block:
//   acc[row][vec] = fma(float(sum), weight scale x activation scale, acc).
// Q6_K, whose weight scale changes every 16 elements, takes each block in
// two parts of 16 bytes (kParts): two products and two epilogues.
// DotBlocksSequentialRef (matvec_scalar.cc) is that arithmetic in plain C++.
// Per block: two tiles of rows (32), loaded once, by the call's vectors two
// tiles (32) at a time, all 8 tile registers: A0 A1 (weights), B0 B1
// (activations), C00 C01 C10 C11.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/matvec_avx512_internal.h"
#include "daemon/kernels/matvec_internal.h"
#include "daemon/kernels/quant_blocks.h"

#ifndef __AMX_INT8__
#error "matmul_amx.cc needs -mamx-tile -mamx-int8"
#endif

namespace waste::kernels::internal::amx {
namespace {

constexpr int kBlockBytes = 32;    // One block's codes: a tile row of A.
constexpr int kActsRowBytes = 64;  // A row of an activation tile: 16 x 4 bytes.

// ldtilecfg's operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-1: weights (16 x `part` bytes: a block or its part); 2-3:
// activations (part / 4 x 64); 4-7: sums (16 x 16 int32). Loaded once per
// Rows call: each thread has its own tile state.
[[gnu::always_inline]] inline void ConfigureTiles(int part) {
  TileConfig c;
  for (int t = 0; t < 2; ++t) {
    c.rows[t] = kTile;
    c.colsb[t] = static_cast<uint16_t>(part);
    c.rows[2 + t] = static_cast<uint8_t>(part / 4);
    c.colsb[2 + t] = kActsRowBytes;
  }
  for (int t = 4; t < 8; ++t) {
    c.rows[t] = kTile;
    c.colsb[t] = 64;
  }
  _tile_loadconfig(&c);
}

// The tile intrinsics' asm names no memory, so GCC may move plain loads and
// stores across them; these fences keep the C++ reads of a stored tile
// after the store, and the next block's stores after those reads.
[[gnu::always_inline]] inline void CompilerFence() { asm volatile("" ::: "memory"); }

// 16 rows of a matrix, one tile's worth (fewer at its end), and what a
// decoder keeps of them between blocks.
struct RowTile {
  int64_t stride = 0;  // From row to row (kRows).
  int rows = 0;        // 1..16 present.
  // Each row's start (RowStart) and whether it sits in a group of a
  // kInterleaved view (Q4_0 reads those).
  const uint8_t* row[kTile];
  bool grouped[kTile];
  // Codes copied or unpacked for a tile load; absent rows zero. The K-types
  // unpack 2 (Q4_K, Q5_K) or 4 (Q6_K) groups at once, group j into
  // stage[j % 2 or 4].
  alignas(64) int8_t stage[4][kTile][kBlockBytes];
  // Per row, the weight scales and min coefficients (the K-types: of the
  // current super-block, in their decoder's lane order; Q8_0: the block's d
  // in lane 0).
  alignas(64) float coef[kTile][16];
};

// A 32-element block's 16 bytes of nibbles at qs (Q4_0's placement) as its
// 32 codes in element order: the low nibbles, then the high ones.
[[gnu::always_inline]] inline __m256i Nibbles32(const uint8_t* qs) {
  const __m128i low = _mm_set1_epi8(0x0F);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), low), _mm_and_si128(bytes, low));
}

// Q8_0: each block's codes load straight from the rows when all 16 are there
// (tile load with the row stride), else from a copy with zeros for the
// missing rows; the weight scale is the block's d.
struct Q8Decoder {
  static constexpr bool kMin = false;
  static constexpr int kParts = 1;
  static bool Reads(WeightLayout layout) { return layout == WeightLayout::kRows; }
  static constexpr int kBlock = sizeof(BlockQ8_0);

  [[gnu::always_inline]] static const int8_t* Codes(RowTile& t, int64_t b, int64_t* stride) {
    const uint8_t* p = t.row[0] + b * kBlock + 2;
    if (t.rows == kTile) {
      // The rows' next blocks, a few ahead: 32 rows read side by side are
      // more streams than the hardware prefetcher follows.
      if (b % 2 == 0) {
        for (int m = 0; m < kTile; ++m) __builtin_prefetch(p + m * t.stride + 8 * kBlock, 0, 3);
      }
      *stride = t.stride;
      return reinterpret_cast<const int8_t*>(p);
    }
    std::memset(t.stage[0], 0, sizeof(t.stage[0]));
    for (int m = 0; m < t.rows; ++m) std::memcpy(t.stage[0][m], p + m * t.stride, kBlockBytes);
    *stride = kBlockBytes;
    return &t.stage[0][0][0];
  }

  // Row m's weight scale of block b at scale[16 m] (0 for absent rows).
  [[gnu::always_inline]] static const float* Scales(RowTile& t, int64_t b, const float** min) {
    for (int m = 0; m < kTile; ++m) {
      uint16_t h = 0;
      if (m < t.rows) std::memcpy(&h, t.row[m] + b * kBlock, 2);
      t.coef[m][0] = F16ToF32(h);
    }
    *min = nullptr;
    return &t.coef[0][0];
  }
};

// Q4_K and Q5_K (kFive): groups 2p and 2p + 1 of a super-block are the low
// and high nibbles of its 32 qs bytes 32p .., unpacked into the stages
// together (Q5_K: bits 2p and 2p + 1 of its 32 qh bytes are their fifth
// bits); a group's weight scale is d x sc and its min coefficient
// -(dmin x m) (UnpackScaleMinK4), made per super-block for each row as one
// vector: lanes 0-3 sc0-3, 4-7 m0-3, 8-11 sc4-7, 12-15 m4-7
// (UnpackQ4KScales' bytes). Both blocks start with the same header.
template <bool kFive>
struct KMinDecoder {
  static constexpr bool kMin = true;
  static constexpr int kParts = 1;
  static bool Reads(WeightLayout layout) { return layout == WeightLayout::kRows; }
  static constexpr int kBlock = kFive ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  static constexpr size_t kQs = kFive ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs);

  [[gnu::always_inline]] static const int8_t* Codes(RowTile& t, int64_t g, int64_t* stride) {
    *stride = kBlockBytes;
    if (g % 2 == 1) return &t.stage[1][0][0];
    const int64_t block = g / 8 * kBlock;
    const int pair = static_cast<int>(g % 8) / 2;
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m128i shift = _mm_cvtsi32_si128(2 * pair);
    for (int m = 0; m < kTile; ++m) {
      __m256i even = _mm256_setzero_si256();
      __m256i odd = _mm256_setzero_si256();
      if (m < t.rows) {
        const uint8_t* p = t.row[m] + block + kQs + 32 * pair;
        __builtin_prefetch(p + 2 * kBlock, 0, 3);
        const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        even = _mm256_and_si256(bytes, low);
        odd = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low);
        if constexpr (kFive) {
          // Bits 2p, 2p + 1 of each qh byte to bit 4 (no bit of a byte
          // crosses into its neighbour's bit 4).
          const __m256i qh = _mm256_srl_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                                  t.row[m] + block + offsetof(BlockQ5_K, qh))),
                                              shift);
          const __m256i bit4 = _mm256_set1_epi8(0x10);
          even = _mm256_or_si256(even, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));
          odd = _mm256_or_si256(odd, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));
        }
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.stage[0][m]), even);
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.stage[1][m]), odd);
    }
    return &t.stage[0][0][0];
  }
  [[gnu::always_inline]] static const float* Scales(RowTile& t, int64_t g, const float** min) {
    const int j = static_cast<int>(g % 8);
    if (j == 0) {
      // Negates the min lanes: -(dmin x m), as the reference rounds it.
      const int neg = static_cast<int>(0x80000000u);
      const __m512 sign = _mm512_castsi512_ps(
          _mm512_setr_epi32(0, 0, 0, 0, neg, neg, neg, neg, 0, 0, 0, 0, neg, neg, neg, neg));
      for (int m = 0; m < kTile; ++m) {
        __m512 coef = _mm512_setzero_ps();
        if (m < t.rows) {
          const auto* block = reinterpret_cast<const BlockQ4_K*>(t.row[m] + g / 8 * kBlock);
          const KScaleWords w = UnpackQ4KScales(block->scales);
          const __m512 bytes = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
              _mm_set_epi64x(static_cast<int64_t>(w.hi), static_cast<int64_t>(w.lo))));
          const __m128 d = _mm_set1_ps(F16ToF32(block->d));
          const __m128 dmin = _mm_set1_ps(F16ToF32(block->dmin));
          const __m512 mul = _mm512_broadcast_f32x4(_mm_shuffle_ps(d, dmin, 0));  // d d dm dm
          const __m512 lanes = _mm512_permutexvar_ps(
              _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0, 2, 2, 2, 2), mul);
          coef = _mm512_xor_ps(_mm512_mul_ps(bytes, lanes), sign);
        }
        _mm512_store_ps(t.coef[m], coef);
      }
    }
    const int lane = j < 4 ? j : j + 4;
    *min = &t.coef[0][lane + 4];
    return &t.coef[0][lane];
  }
};

// Q6_K: the 4 groups 4h .. 4h + 3 of super-block half h share its 64 ql
// bytes 64h .. (low nibbles: groups 4h, 4h + 1; high: 4h + 2, 4h + 3) and 32
// qh bytes 32h .. (2 bits each, group 4h + r at bits 2r): unpacked together,
// less 32. A group's two parts of 16 have their own int8 scale: d x
// scales[2j + part] in lane 2j + part of the row's vector.
struct Q6KDecoder {
  static constexpr bool kMin = false;
  static constexpr int kParts = 2;
  static bool Reads(WeightLayout layout) { return layout == WeightLayout::kRows; }
  static constexpr int kBlock = sizeof(BlockQ6_K);

  [[gnu::always_inline]] static const int8_t* Codes(RowTile& t, int64_t g, int64_t* stride) {
    *stride = kBlockBytes;
    if (g % 4 != 0) return &t.stage[g % 4][0][0];
    const int64_t half = g % 8 / 4;
    const int64_t ql = g / 8 * kBlock + offsetof(BlockQ6_K, ql) + 64 * half;
    const int64_t qh = g / 8 * kBlock + offsetof(BlockQ6_K, qh) + 32 * half;
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i high = _mm256_set1_epi8(0x30);
    const __m256i zero_point = _mm256_set1_epi8(32);
    for (int m = 0; m < kTile; ++m) {
      __m256i c[4] = {};
      if (m < t.rows) {
        auto load = [&t, m](int64_t offset) {
          return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.row[m] + offset));
        };
        __builtin_prefetch(t.row[m] + ql + 2 * kBlock, 0, 3);
        __builtin_prefetch(t.row[m] + ql + 2 * kBlock + 64, 0, 3);
        const __m256i l0 = load(ql), l1 = load(ql + 32), h = load(qh);
        // The high bits to bits 4-5 (epi16 shifts: what crosses a byte is
        // masked off).
        c[0] = _mm256_or_si256(_mm256_and_si256(l0, low),
                               _mm256_and_si256(_mm256_slli_epi16(h, 4), high));
        c[1] = _mm256_or_si256(_mm256_and_si256(l1, low),
                               _mm256_and_si256(_mm256_slli_epi16(h, 2), high));
        c[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low),
                               _mm256_and_si256(h, high));
        c[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low),
                               _mm256_and_si256(_mm256_srli_epi16(h, 2), high));
        for (__m256i& v : c) v = _mm256_sub_epi8(v, zero_point);
      }
      for (int r = 0; r < 4; ++r)
        _mm256_store_si256(reinterpret_cast<__m256i*>(t.stage[r][m]), c[r]);
    }
    return &t.stage[0][0][0];
  }

  [[gnu::always_inline]] static const float* Scales(RowTile& t, int64_t g, const float** min) {
    if (g % 8 == 0) {
      for (int m = 0; m < kTile; ++m) {
        __m512 coef = _mm512_setzero_ps();
        if (m < t.rows) {
          const auto* block = reinterpret_cast<const BlockQ6_K*>(t.row[m] + g / 8 * kBlock);
          coef = _mm512_mul_ps(_mm512_set1_ps(F16ToF32(block->d)),
                               _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                                   reinterpret_cast<const __m128i*>(block->scales)))));
        }
        _mm512_store_ps(t.coef[m], coef);
      }
    }
    *min = nullptr;
    return &t.coef[0][2 * (g % 8)];
  }
};

// Q4_0, as GGUF has its rows or kInterleaved (resident on AVX-512): a
// block's 16 qs bytes unpack to its 32 codes (low nibbles first) less 8, as
// int8; its d is the weight scale, read with the codes.
struct Q40Decoder {
  static constexpr bool kMin = false;
  static constexpr int kParts = 1;
  static bool Reads(WeightLayout layout) {
    return layout == WeightLayout::kRows || layout == WeightLayout::kInterleaved;
  }
  static constexpr int kBlock = sizeof(BlockQ4_0);
  static constexpr int kUnit = 8 * kBlock;

  [[gnu::always_inline]] static const int8_t* Codes(RowTile& t, int64_t b, int64_t* stride) {
    const __m256i eight = _mm256_set1_epi8(8);
    for (int m = 0; m < kTile; ++m) {
      __m256i codes = _mm256_setzero_si256();
      uint16_t d = 0;
      if (m < t.rows) {
        const uint8_t* qs;
        const uint8_t* scale;
        if (t.grouped[m]) {
          const uint8_t* unit = t.row[m] + b / 8 * (kInterleaveRows * kUnit);
          if (b % 8 == 0) {
            for (int l = 0; l < kUnit; l += 64)
              __builtin_prefetch(unit + 2 * kInterleaveRows * kUnit + l, 0, 3);
          }
          scale = unit + 2 * (b % 8);
          qs = unit + kUnitScaleBytes + 16 * (b % 8);
        } else {
          scale = t.row[m] + b * kBlock;
          qs = scale + 2;
          if (b % 4 == 0) __builtin_prefetch(scale + 8 * kBlock, 0, 3);
        }
        std::memcpy(&d, scale, 2);
        codes = _mm256_sub_epi8(Nibbles32(qs), eight);
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.stage[0][m]), codes);
      t.coef[m][0] = F16ToF32(d);
    }
    *stride = kBlockBytes;
    return &t.stage[0][0][0];
  }

  // The d of Codes' block, for each row.
  [[gnu::always_inline]] static const float* Scales(RowTile& t, int64_t, const float** min) {
    *min = nullptr;
    return &t.coef[0][0];
  }
};

// Q4_1, Q5_0 and Q5_1: a block's nibbles as Q4_0's (Nibbles32), the Q5
// types' fifth bits (bit j of qh: element j) as bit 4; Q5_0's codes less 16,
// Q4_1's and Q5_1's unsigned with a min coefficient m against s32. Weight
// scale d in lane 0 of the row's vector, m in lane 1.
template <WeightType kType>
struct LegacyDecoder {
  static constexpr bool kMin = kType != WeightType::kQ5_0;
  static constexpr bool kFive = kType != WeightType::kQ4_1;
  static constexpr int kParts = 1;
  static bool Reads(WeightLayout layout) { return layout == WeightLayout::kRows; }
  using Block =
      std::conditional_t<kType == WeightType::kQ4_1, BlockQ4_1,
                         std::conditional_t<kType == WeightType::kQ5_0, BlockQ5_0, BlockQ5_1>>;
  static constexpr int kBlock = sizeof(Block);

  [[gnu::always_inline]] static const int8_t* Codes(RowTile& t, int64_t b, int64_t* stride) {
    // Byte j of the vector tests bit j % 8 of qh byte j / 8.
    const __m256i spread =
        _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
    for (int m = 0; m < kTile; ++m) {
      __m256i codes = _mm256_setzero_si256();
      if (m < t.rows) {
        const auto* block = reinterpret_cast<const Block*>(t.row[m]) + b;
        if (b % 4 == 0) __builtin_prefetch(block + 8, 0, 3);
        codes = Nibbles32(block->qs);
        if constexpr (kFive) {
          const __m256i qh =
              _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(LoadU32(block->qh))), spread);
          const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
          codes = _mm256_or_si256(codes, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
        }
        if constexpr (kType == WeightType::kQ5_0) {
          codes = _mm256_sub_epi8(codes, _mm256_set1_epi8(16));
        }
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.stage[0][m]), codes);
    }
    *stride = kBlockBytes;
    return &t.stage[0][0][0];
  }

  [[gnu::always_inline]] static const float* Scales(RowTile& t, int64_t b, const float** min) {
    for (int m = 0; m < kTile; ++m) {
      float d = 0, mn = 0;
      if (m < t.rows) {
        const auto* block = reinterpret_cast<const Block*>(t.row[m]) + b;
        d = F16ToF32(block->d);
        if constexpr (kMin) mn = F16ToF32(block->m);
      }
      t.coef[m][0] = d;
      t.coef[m][1] = mn;
    }
    *min = kMin ? &t.coef[0][1] : nullptr;
    return &t.coef[0][0];
  }
};

// IQ4_NL and MXFP4 (blocks of 32: a scale and 16 bytes of nibbles, placed as
// Q4_0's) and IQ4_XS (super-blocks of 8 such groups, a 6-bit scale each):
// each group's nibbles looked up in the type's 16 int8 values (vpshufb) are
// its codes; the weight scale is the block's (IQ4_XS: d x (scale - 32),
// per super-block for each row, lane j for group j).
template <WeightType kType>
struct TableDecoder {
  static constexpr bool kMin = false;
  static constexpr int kParts = 1;
  static bool Reads(WeightLayout layout) { return layout == WeightLayout::kRows; }
  static constexpr bool kSuper = kType == WeightType::kIQ4_XS;
  using Block =
      std::conditional_t<kSuper, BlockIQ4_XS,
                         std::conditional_t<kType == WeightType::kMXFP4, BlockMXFP4, BlockIQ4_NL>>;
  static constexpr int kBlock = sizeof(Block);

  [[gnu::always_inline]] static const int8_t* Codes(RowTile& t, int64_t b, int64_t* stride) {
    const int8_t* values = kType == WeightType::kMXFP4 ? kMxfp4Values : kIq4NlValues;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
    const int64_t offset = kSuper ? b / 8 * kBlock + offsetof(Block, qs) + 16 * (b % 8)
                                  : b * kBlock + offsetof(Block, qs);
    for (int m = 0; m < kTile; ++m) {
      __m256i codes = _mm256_setzero_si256();
      if (m < t.rows) {
        const uint8_t* qs = t.row[m] + offset;
        if (b % 4 == 0) __builtin_prefetch(qs + 8 * kBlock / (kSuper ? 8 : 1), 0, 3);
        codes = _mm256_shuffle_epi8(table, Nibbles32(qs));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.stage[0][m]), codes);
    }
    *stride = kBlockBytes;
    return &t.stage[0][0][0];
  }

  [[gnu::always_inline]] static const float* Scales(RowTile& t, int64_t b, const float** min) {
    *min = nullptr;
    if constexpr (kSuper) {
      if (b % 8 == 0) {
        // UnpackScaleIQ4XS for the 8 groups at once: nibble j of scales_l
        // and bits 2j, 2j + 1 of scales_h as bits 4-5, less 32.
        const __m256i j4 = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        const __m256i j2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        for (int m = 0; m < kTile; ++m) {
          __m256 coef = _mm256_setzero_ps();
          if (m < t.rows) {
            const auto* block = reinterpret_cast<const BlockIQ4_XS*>(t.row[m] + b / 8 * kBlock);
            const __m256i low = _mm256_and_si256(
                _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(LoadU32(block->scales_l))),
                                  j4),
                _mm256_set1_epi32(0xF));
            const __m256i high = _mm256_and_si256(
                _mm256_srlv_epi32(_mm256_set1_epi32(block->scales_h), j2), _mm256_set1_epi32(3));
            const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)),
                                                _mm256_set1_epi32(32));
            coef = _mm256_mul_ps(_mm256_set1_ps(F16ToF32(block->d)), _mm256_cvtepi32_ps(ls));
          }
          _mm256_store_ps(t.coef[m], coef);
        }
      }
      return &t.coef[0][b % 8];
    } else {
      for (int m = 0; m < kTile; ++m) {
        float d = 0;
        if (m < t.rows) {
          const auto* block = reinterpret_cast<const Block*>(t.row[m]) + b;
          if constexpr (kType == WeightType::kMXFP4) {
            d = E8M0HalfToF32(block->e);
          } else {
            d = F16ToF32(block->d);
          }
        }
        t.coef[m][0] = d;
      }
      return &t.coef[0][0];
    }
  }
};

// acc[m] (16 vectors) += sums[m] x scale[16 m] x da (+ min[16 m] x s32),
// m < 16.
template <bool kMin>
[[gnu::always_inline]] inline void Epilogue(const int32_t (*sums)[kTile], const float* scale,
                                            const float* min, const float* acts_scales,
                                            float (*acc)[kTile]) {
  const __m512 da = _mm512_load_ps(acts_scales);
  const __m512 s32 = _mm512_load_ps(acts_scales + kTile);
#pragma GCC unroll 16
  for (int m = 0; m < kTile; ++m) {
    const __m512 w = _mm512_mul_ps(_mm512_set1_ps(scale[16 * m]), da);
    const __m512 sum = _mm512_cvtepi32_ps(_mm512_load_si512(sums[m]));
    __m512 a = _mm512_fmadd_ps(sum, w, _mm512_load_ps(acc[m]));
    if constexpr (kMin) a = _mm512_fmadd_ps(_mm512_set1_ps(min[16 * m]), s32, a);
    _mm512_store_ps(acc[m], a);
  }
}

// Bytes of a block's codes (a weight tile row) per part.
template <typename Dec>
constexpr int kPartBytes = kBlockBytes / Dec::kParts;

// The rows' codes of a block, decoded once for all its parts.
struct BlockCodes {
  const int8_t* codes[2];
  int64_t stride[2];
};

template <typename Dec, int kRowTiles>
[[gnu::always_inline]] inline BlockCodes DecodeBlock(RowTile* rt, int64_t b) {
  BlockCodes c;
  for (int i = 0; i < kRowTiles; ++i) c.codes[i] = Dec::Codes(rt[i], b, &c.stride[i]);
  return c;
}

// Part `part` of the rows' codes in tile registers 0 (and 1).
template <typename Dec, int kRowTiles>
[[gnu::always_inline]] inline void LoadPart(const BlockCodes& c, int part) {
  CompilerFence();
  _tile_loadd(0, c.codes[0] + part * kPartBytes<Dec>, c.stride[0]);
  if constexpr (kRowTiles == 2) _tile_loadd(1, c.codes[1] + part * kPartBytes<Dec>, c.stride[1]);
}

// The products of the loaded codes with part `part` of vector tiles v (the
// block's at a0) and, where kTwo, v + 1 (at a1), added into acc[row
// tile][vector tile]; the part's weight scales are lane `part` of scale[i]'s.
template <typename Dec, int kRowTiles, bool kTwo>
[[gnu::always_inline]] inline void VectorPair(const uint8_t* a0, const uint8_t* a1, int part,
                                              const float* const* scale, const float* const* min,
                                              float (*acc)[4][kTile][kTile], int v) {
  alignas(64) int32_t sums[2][2][kTile][kTile];
  const int offset = part * (kPartBytes<Dec> / 4) * kActsRowBytes;
  _tile_loadd(2, a0 + offset, kActsRowBytes);
  if constexpr (kTwo) _tile_loadd(3, a1 + offset, kActsRowBytes);
  _tile_zero(4);
  _tile_dpbssd(4, 0, 2);
  if constexpr (kTwo) {
    _tile_zero(5);
    _tile_dpbssd(5, 0, 3);
  }
  if constexpr (kRowTiles == 2) {
    _tile_zero(6);
    _tile_dpbssd(6, 1, 2);
    if constexpr (kTwo) {
      _tile_zero(7);
      _tile_dpbssd(7, 1, 3);
    }
  }
  CompilerFence();
  _tile_stored(4, sums[0][0], 64);
  if constexpr (kTwo) _tile_stored(5, sums[0][1], 64);
  if constexpr (kRowTiles == 2) {
    _tile_stored(6, sums[1][0], 64);
    if constexpr (kTwo) _tile_stored(7, sums[1][1], 64);
  }
  CompilerFence();
  for (int i = 0; i < kRowTiles; ++i) {
    for (int j = 0; j < (kTwo ? 2 : 1); ++j) {
      const float* acts_scales =
          reinterpret_cast<const float*>((j == 0 ? a0 : a1) + kActsTileBytes);
      Epilogue<Dec::kMin>(sums[i][j], scale[i] + part, min[i], acts_scales, acc[i][v + j]);
    }
  }
}

// kRowTiles tiles of rows by `vec_tiles` (<= 4) tiles of vectors over every
// block (and part of it), into acc[row tile][vector tile][row][vector]:
// each block's codes are decoded once, and each part loaded once for all
// the vector tiles, which go through the tile registers two at a time.
template <typename Dec, int kRowTiles>
void RowsPass(RowTile* rt, const uint8_t* acts, int64_t acts_tile_stride, int64_t blocks,
              int vec_tiles, float (*acc)[4][kTile][kTile]) {
  for (int64_t b = 0; b < blocks; ++b) {
    CompilerFence();
    const BlockCodes codes = DecodeBlock<Dec, kRowTiles>(rt, b);
    const float* scale[2];
    const float* min[2];
    for (int i = 0; i < kRowTiles; ++i) scale[i] = Dec::Scales(rt[i], b, &min[i]);
    for (int part = 0; part < Dec::kParts; ++part) {
      LoadPart<Dec, kRowTiles>(codes, part);
      for (int v = 0; v < vec_tiles; v += 2) {
        const uint8_t* a0 = acts + v * acts_tile_stride + b * kActsBlockBytes;
        if (v + 1 < vec_tiles) {
          VectorPair<Dec, kRowTiles, true>(a0, a0 + acts_tile_stride, part, scale, min, acc, v);
        } else {
          VectorPair<Dec, kRowTiles, false>(a0, nullptr, part, scale, min, acc, v);
        }
      }
    }
  }
}

template <typename Dec>
void RowsAmx(const RowsTask& t, int64_t begin, int64_t end) {
  if (!Dec::Reads(t.w.layout)) {
    Avx512Kernels().rows(t, begin, end);
    return;
  }
  ConfigureTiles(kPartBytes<Dec>);
  const int64_t blocks = t.w.cols / kQK32;
  const int64_t acts_tile_stride = blocks * kActsBlockBytes;
  RowTile rt[2];
  alignas(64) float acc[2][4][kTile][kTile];
  static_assert(kMaxBatch <= 4 * kTile, "acc holds 4 tiles of vectors");
  const int vec_tiles = static_cast<int>((t.batch + kTile - 1) / kTile);
  for (int64_t r0 = begin; r0 < end; r0 += 2 * kTile) {
    const int64_t rows = std::min<int64_t>(2 * kTile, end - r0);
    const int row_tiles = rows > kTile ? 2 : 1;
    for (int i = 0; i < row_tiles; ++i) {
      rt[i].stride = t.w.row_stride_bytes;
      rt[i].rows = static_cast<int>(std::min<int64_t>(kTile, rows - i * kTile));
      for (int m = 0; m < rt[i].rows; ++m) {
        const int64_t r = r0 + i * kTile + m;
        rt[i].row[m] = RowStart(t.w, r);
        rt[i].grouped[m] = r < InterleavedRows(t.w);
      }
    }
    std::memset(acc, 0, sizeof(acc));
    if (row_tiles == 2) {
      RowsPass<Dec, 2>(rt, t.matrix_acts, acts_tile_stride, blocks, vec_tiles, acc);
    } else {
      RowsPass<Dec, 1>(rt, t.matrix_acts, acts_tile_stride, blocks, vec_tiles, acc);
    }
    for (int i = 0; i < row_tiles; ++i) {
      for (int j = 0; j < vec_tiles; ++j) {
        for (int n = 0; n < kTile && j * kTile + n < t.batch; ++n) {
          float* y = t.y + (j * kTile + n) * t.y_stride + r0 + i * kTile;
          for (int m = 0; m < rt[i].rows; ++m) y[m] = acc[i][j][m][n];
        }
      }
    }
  }
  _tile_release();
}

// The AVX-512 quantizer: the loops read its qs, d and s32.
const IsaKernels kQ8_0Kernels = {avx512::QuantizeActsAvx512, RowsAmx<Q8Decoder>};
const IsaKernels kQ4KKernels = {avx512::QuantizeActsAvx512, RowsAmx<KMinDecoder<false>>};
const IsaKernels kQ5KKernels = {avx512::QuantizeActsAvx512, RowsAmx<KMinDecoder<true>>};
const IsaKernels kQ6KKernels = {avx512::QuantizeActsAvx512, RowsAmx<Q6KDecoder>};
const IsaKernels kQ4_0Kernels = {avx512::QuantizeActsAvx512, RowsAmx<Q40Decoder>};
const IsaKernels kQ4_1Kernels = {avx512::QuantizeActsAvx512,
                                 RowsAmx<LegacyDecoder<WeightType::kQ4_1>>};
const IsaKernels kQ5_0Kernels = {avx512::QuantizeActsAvx512,
                                 RowsAmx<LegacyDecoder<WeightType::kQ5_0>>};
const IsaKernels kQ5_1Kernels = {avx512::QuantizeActsAvx512,
                                 RowsAmx<LegacyDecoder<WeightType::kQ5_1>>};
const IsaKernels kIq4NlKernels = {avx512::QuantizeActsAvx512,
                                  RowsAmx<TableDecoder<WeightType::kIQ4_NL>>};
const IsaKernels kIq4XsKernels = {avx512::QuantizeActsAvx512,
                                  RowsAmx<TableDecoder<WeightType::kIQ4_XS>>};
const IsaKernels kMxfp4Kernels = {avx512::QuantizeActsAvx512,
                                  RowsAmx<TableDecoder<WeightType::kMXFP4>>};

}  // namespace

const IsaKernels* Kernels(WeightType type) {
  switch (type) {
    case WeightType::kQ8_0:
      return &kQ8_0Kernels;
    case WeightType::kQ4_K:
      return &kQ4KKernels;
    case WeightType::kQ5_K:
      return &kQ5KKernels;
    case WeightType::kQ6_K:
      return &kQ6KKernels;
    case WeightType::kQ4_0:
      return &kQ4_0Kernels;
    case WeightType::kQ4_1:
      return &kQ4_1Kernels;
    case WeightType::kQ5_0:
      return &kQ5_0Kernels;
    case WeightType::kQ5_1:
      return &kQ5_1Kernels;
    case WeightType::kIQ4_NL:
      return &kIq4NlKernels;
    case WeightType::kIQ4_XS:
      return &kIq4XsKernels;
    case WeightType::kMXFP4:
      return &kMxfp4Kernels;
    default:
      return nullptr;
  }
}

}  // namespace waste::kernels::internal::amx
