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
// DotBlocksSequentialRef (matvec_scalar.cc) is that arithmetic in plain C++.
// Per block: two tiles of rows (32), loaded once, by the call's vectors two
// tiles (32) at a time, all 8 tile registers: A0 A1 (weights), B0 B1
// (activations), C00 C01 C10 C11.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

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

constexpr int kBlockBytes = 32;  // One block's codes: a tile row of A.

// ldtilecfg's operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-1: weights (16 x 32 bytes); 2-3: activations (8 x 64); 4-7: sums
// (16 x 16 int32). Loaded once per Rows call: each thread has its own tile
// state.
[[gnu::always_inline]] inline void ConfigureTiles() {
  TileConfig c;
  for (int t = 0; t < 2; ++t) {
    c.rows[t] = kTile;
    c.colsb[t] = kBlockBytes;
    c.rows[2 + t] = kBlockBytes / 4;
    c.colsb[2 + t] = 64;
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
  // Codes copied or unpacked for a tile load; absent rows zero. Q4_K
  // unpacks a pair of groups at once: the odd one's go to stage_odd.
  alignas(64) int8_t stage[kTile][kBlockBytes];
  alignas(64) int8_t stage_odd[kTile][kBlockBytes];
  // Per row, the weight scales and min coefficients (Q4_K: of the current
  // super-block, in Q4KDecoder's lane order; Q8_0: the block's d in lane 0).
  alignas(64) float coef[kTile][16];
};

// Q8_0: each block's codes load straight from the rows when all 16 are there
// (tile load with the row stride), else from a copy with zeros for the
// missing rows; the weight scale is the block's d.
struct Q8Decoder {
  static constexpr bool kMin = false;
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
    std::memset(t.stage, 0, sizeof(t.stage));
    for (int m = 0; m < t.rows; ++m) std::memcpy(t.stage[m], p + m * t.stride, kBlockBytes);
    *stride = kBlockBytes;
    return &t.stage[0][0];
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

// Q4_K: groups 2p and 2p + 1 of a super-block are the low and high
// nibbles of its 32 qs bytes 32p .., unpacked into the stages together; a
// group's weight scale is d x sc and its min coefficient -(dmin x m)
// (UnpackScaleMinK4), made per super-block for each row as one vector:
// lanes 0-3 sc0-3, 4-7 m0-3, 8-11 sc4-7, 12-15 m4-7 (UnpackQ4KScales' bytes).
struct Q4KDecoder {
  static constexpr bool kMin = true;
  static bool Reads(WeightLayout layout) { return layout == WeightLayout::kRows; }
  static constexpr int kBlock = sizeof(BlockQ4_K);

  [[gnu::always_inline]] static const int8_t* Codes(RowTile& t, int64_t g, int64_t* stride) {
    *stride = kBlockBytes;
    if (g % 2 == 1) return &t.stage_odd[0][0];
    const int64_t offset = g / 8 * kBlock + offsetof(BlockQ4_K, qs) + 16 * (g % 8);
    const __m256i low = _mm256_set1_epi8(0x0F);
    for (int m = 0; m < kTile; ++m) {
      __m256i bytes = _mm256_setzero_si256();
      if (m < t.rows) {
        const uint8_t* p = t.row[m] + offset;
        __builtin_prefetch(p + 2 * kBlock, 0, 3);
        bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.stage[m]), _mm256_and_si256(bytes, low));
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.stage_odd[m]),
                         _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low));
    }
    return &t.stage[0][0];
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
          const auto* block = reinterpret_cast<const BlockQ4_K*>(t.row[m]) + g / 8;
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

// Q4_0, as GGUF has its rows or kInterleaved (resident on AVX-512): a
// block's 16 qs bytes unpack to its 32 codes (low nibbles first) less 8, as
// int8; its d is the weight scale, read with the codes.
struct Q40Decoder {
  static constexpr bool kMin = false;
  static bool Reads(WeightLayout layout) {
    return layout == WeightLayout::kRows || layout == WeightLayout::kInterleaved;
  }
  static constexpr int kBlock = sizeof(BlockQ4_0);
  static constexpr int kUnit = 8 * kBlock;

  [[gnu::always_inline]] static const int8_t* Codes(RowTile& t, int64_t b, int64_t* stride) {
    const __m128i low = _mm_set1_epi8(0x0F);
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
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
        codes = _mm256_sub_epi8(_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), low),
                                                 _mm_and_si128(bytes, low)),
                                eight);
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.stage[m]), codes);
      t.coef[m][0] = F16ToF32(d);
    }
    *stride = kBlockBytes;
    return &t.stage[0][0];
  }

  // The d of Codes' block, for each row.
  [[gnu::always_inline]] static const float* Scales(RowTile& t, int64_t, const float** min) {
    *min = nullptr;
    return &t.coef[0][0];
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

// The rows' codes of block b in tile registers 0 (and 1), for kRowTiles
// tiles of rows.
template <typename Dec, int kRowTiles>
[[gnu::always_inline]] inline void LoadCodes(RowTile* rt, int64_t b) {
  int64_t stride;
  const int8_t* codes = Dec::Codes(rt[0], b, &stride);
  CompilerFence();
  _tile_loadd(0, codes, stride);
  if constexpr (kRowTiles == 2) {
    codes = Dec::Codes(rt[1], b, &stride);
    CompilerFence();
    _tile_loadd(1, codes, stride);
  }
}

// The products of the loaded codes with vector tiles v (at a0) and, where
// kTwo, v + 1 (at a1) of one block, added into acc[row tile][vector tile].
template <typename Dec, int kRowTiles, bool kTwo>
[[gnu::always_inline]] inline void VectorPair(const uint8_t* a0, const uint8_t* a1,
                                              const float* const* scale, const float* const* min,
                                              float (*acc)[4][kTile][kTile], int v) {
  alignas(64) int32_t sums[2][2][kTile][kTile];
  _tile_loadd(2, a0, 64);
  if constexpr (kTwo) _tile_loadd(3, a1, 64);
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
      Epilogue<Dec::kMin>(sums[i][j], scale[i], min[i], acts_scales, acc[i][v + j]);
    }
  }
}

// kRowTiles tiles of rows by `vec_tiles` (<= 4) tiles of vectors over every
// block, into acc[row tile][vector tile][row][vector]: each block's codes
// are loaded (and unpacked) once for all the vector tiles, which go through
// the tile registers two at a time.
template <typename Dec, int kRowTiles>
void RowsPass(RowTile* rt, const uint8_t* acts, int64_t acts_tile_stride, int64_t blocks,
              int vec_tiles, float (*acc)[4][kTile][kTile]) {
  for (int64_t b = 0; b < blocks; ++b) {
    CompilerFence();
    LoadCodes<Dec, kRowTiles>(rt, b);
    const float* scale[2];
    const float* min[2];
    for (int i = 0; i < kRowTiles; ++i) scale[i] = Dec::Scales(rt[i], b, &min[i]);
    for (int v = 0; v < vec_tiles; v += 2) {
      const uint8_t* a0 = acts + v * acts_tile_stride + b * kActsBlockBytes;
      if (v + 1 < vec_tiles) {
        VectorPair<Dec, kRowTiles, true>(a0, a0 + acts_tile_stride, scale, min, acc, v);
      } else {
        VectorPair<Dec, kRowTiles, false>(a0, nullptr, scale, min, acc, v);
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
  ConfigureTiles();
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
const IsaKernels kQ4KKernels = {avx512::QuantizeActsAvx512, RowsAmx<Q4KDecoder>};
const IsaKernels kQ4_0Kernels = {avx512::QuantizeActsAvx512, RowsAmx<Q40Decoder>};

}  // namespace

const IsaKernels* Kernels(WeightType type) {
  switch (type) {
    case WeightType::kQ8_0:
      return &kQ8_0Kernels;
    case WeightType::kQ4_K:
      return &kQ4KKernels;
    case WeightType::kQ4_0:
      return &kQ4_0Kernels;
    default:
      return nullptr;
  }
}

}  // namespace waste::kernels::internal::amx
