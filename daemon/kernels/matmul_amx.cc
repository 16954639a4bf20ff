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
// Per pass: two tiles of rows (32) by two of vectors (32), all 8 tile
// registers: A0 A1 (weights), B0 B1 (activations), C00 C01 C10 C11.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

// 16 rows of Q8_0 codes for one block: straight from the rows when all 16
// are there (tile load with the row stride), else copied into `stage` with
// zeros for the missing ones.
struct RowTile {
  const uint8_t* first = nullptr;  // Row 0 of the tile.
  int64_t stride = 0;
  int rows = 0;  // 1..16 present.
  alignas(64) uint8_t stage[kTile][kBlockBytes];
};

constexpr int kQ8Block = sizeof(BlockQ8_0);

// The 16 rows' weight scales of block b (0 for absent rows).
[[gnu::always_inline]] inline void LoadScales(const RowTile& t, int64_t b, float* out) {
  alignas(32) uint16_t h[kTile] = {};
  for (int m = 0; m < t.rows; ++m) std::memcpy(&h[m], t.first + m * t.stride + b * kQ8Block, 2);
  _mm512_store_ps(out, _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h))));
}

// Where the 16 rows' codes of block b load from, and *stride their row
// stride: the rows themselves, or their copy in t.stage.
[[gnu::always_inline]] inline const uint8_t* Codes(RowTile& t, int64_t b, int64_t* stride) {
  const uint8_t* p = t.first + b * kQ8Block + 2;
  if (t.rows == kTile) {
    // The rows' next blocks, a few ahead: 32 rows read side by side are more
    // streams than the hardware prefetcher follows.
    if (b % 2 == 0) {
      for (int m = 0; m < kTile; ++m) __builtin_prefetch(p + m * t.stride + 8 * kQ8Block, 0, 3);
    }
    *stride = t.stride;
    return p;
  }
  std::memset(t.stage, 0, sizeof(t.stage));
  for (int m = 0; m < t.rows; ++m) std::memcpy(t.stage[m], p + m * t.stride, kBlockBytes);
  CompilerFence();
  *stride = kBlockBytes;
  return &t.stage[0][0];
}

// acc[m] (16 vectors) += sums[m] x dw[m] x da, m < 16.
[[gnu::always_inline]] inline void Epilogue(const int32_t (*sums)[kTile], const float* dw,
                                            const float* da, float (*acc)[kTile]) {
  const __m512 dav = _mm512_load_ps(da);
#pragma GCC unroll 16
  for (int m = 0; m < kTile; ++m) {
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(dw[m]), dav);
    const __m512 sum = _mm512_cvtepi32_ps(_mm512_load_si512(sums[m]));
    _mm512_store_ps(acc[m], _mm512_fmadd_ps(sum, scale, _mm512_load_ps(acc[m])));
  }
}

// One pass: kRowTiles tiles of rows by kVecTiles tiles of vectors over every
// block, into acc[2 x row tile + vector tile][row][vector].
template <int kRowTiles, int kVecTiles>
void RowsPass(RowTile* rt, const uint8_t* acts, int64_t acts_tile_stride, int64_t blocks,
              float (*acc)[kTile][kTile]) {
  alignas(64) int32_t sums[2][2][kTile][kTile];
  alignas(64) float dw[2][kTile];
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* a0 = acts + b * kActsBlockBytes;
    const uint8_t* a1 = a0 + acts_tile_stride;
    CompilerFence();
    int64_t stride;
    const uint8_t* codes = Codes(rt[0], b, &stride);
    _tile_loadd(0, codes, stride);
    if constexpr (kRowTiles == 2) {
      codes = Codes(rt[1], b, &stride);
      _tile_loadd(1, codes, stride);
    }
    _tile_loadd(2, a0, 64);
    if constexpr (kVecTiles == 2) _tile_loadd(3, a1, 64);
    _tile_zero(4);
    _tile_dpbssd(4, 0, 2);
    if constexpr (kVecTiles == 2) {
      _tile_zero(5);
      _tile_dpbssd(5, 0, 3);
    }
    if constexpr (kRowTiles == 2) {
      _tile_zero(6);
      _tile_dpbssd(6, 1, 2);
      if constexpr (kVecTiles == 2) {
        _tile_zero(7);
        _tile_dpbssd(7, 1, 3);
      }
    }
    _tile_stored(4, sums[0][0], 64);
    if constexpr (kVecTiles == 2) _tile_stored(5, sums[0][1], 64);
    if constexpr (kRowTiles == 2) {
      _tile_stored(6, sums[1][0], 64);
      if constexpr (kVecTiles == 2) _tile_stored(7, sums[1][1], 64);
    }
    CompilerFence();
    for (int i = 0; i < kRowTiles; ++i) {
      LoadScales(rt[i], b, dw[i]);
      for (int j = 0; j < kVecTiles; ++j) {
        const float* da = reinterpret_cast<const float*>((j == 0 ? a0 : a1) + kActsTileBytes);
        Epilogue(sums[i][j], dw[i], da, acc[i * 2 + j]);
      }
    }
  }
}

void RowsQ8(const RowsTask& t, int64_t begin, int64_t end) {
  ConfigureTiles();
  const int64_t blocks = t.w.cols / kQK32;
  const int64_t vec_tiles = (t.batch + kTile - 1) / kTile;
  const int64_t acts_tile_stride = blocks * kActsBlockBytes;
  if (t.w.layout != WeightLayout::kRows) {
    Avx512Kernels().rows(t, begin, end);  // The loops read only GGUF's rows.
    return;
  }
  RowTile rt[2];
  alignas(64) float acc[4][kTile][kTile];
  for (int64_t r0 = begin; r0 < end; r0 += 2 * kTile) {
    const int64_t rows = std::min<int64_t>(2 * kTile, end - r0);
    const int row_tiles = rows > kTile ? 2 : 1;
    for (int i = 0; i < row_tiles; ++i) {
      rt[i].first = RowStart(t.w, r0 + i * kTile);
      rt[i].stride = t.w.row_stride_bytes;
      rt[i].rows = static_cast<int>(std::min<int64_t>(kTile, rows - i * kTile));
    }
    for (int64_t v0 = 0; v0 < vec_tiles; v0 += 2) {
      const int vt = v0 + 1 < vec_tiles ? 2 : 1;
      std::memset(acc, 0, sizeof(acc));
      const uint8_t* acts = t.matrix_acts + v0 * acts_tile_stride;
      if (row_tiles == 2 && vt == 2) {
        RowsPass<2, 2>(rt, acts, acts_tile_stride, blocks, acc);
      } else if (row_tiles == 2) {
        RowsPass<2, 1>(rt, acts, acts_tile_stride, blocks, acc);
      } else if (vt == 2) {
        RowsPass<1, 2>(rt, acts, acts_tile_stride, blocks, acc);
      } else {
        RowsPass<1, 1>(rt, acts, acts_tile_stride, blocks, acc);
      }
      for (int i = 0; i < row_tiles; ++i) {
        for (int j = 0; j < vt; ++j) {
          const float(*tile)[kTile] = acc[i * 2 + j];
          for (int n = 0; n < kTile && (v0 + j) * kTile + n < t.batch; ++n) {
            float* y = t.y + ((v0 + j) * kTile + n) * t.y_stride + r0 + i * kTile;
            for (int m = 0; m < rt[i].rows; ++m) y[m] = tile[m][n];
          }
        }
      }
    }
  }
  _tile_release();
}

// The AVX-512 quantizer: the loops read its qs and d.
const IsaKernels kQ8_0Kernels = {avx512::QuantizeActsAvx512, RowsQ8};

}  // namespace

const IsaKernels* Kernels(WeightType type) {
  return type == WeightType::kQ8_0 ? &kQ8_0Kernels : nullptr;
}

}  // namespace waste::kernels::internal::amx
