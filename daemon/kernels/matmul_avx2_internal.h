// The register-tiled AVX2 loops' shared pieces (matmul_avx2.cc: the
// layout, Q4_0, Q4_K, Q2_K, Q3_K; matmul_avx2_table.cc: IQ4_NL, IQ4_XS,
// MXFP4): the decoded unit, the row tails, and the drivers that run a
// decoder's loop over a task's rows and tiles of activation vectors. For
// the AVX2_COPTS and AVXVNNI_COPTS translation units only (avx2_inline.h).
// Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_MATMUL_AVX2_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_MATMUL_AVX2_INTERNAL_H_

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "daemon/kernels/avx2_inline.h"
#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels::internal::WASTE_AVX2_NS::tiled {

inline constexpr int kTile = 8;

// 256 weights decoded: lane j of codes[i] holds 4 codes of block G(j)
// (elements 4 Qd(i, j) ..), u8; wsc the weight scale of lane j's block; Q4_K:
// mcoef the min coefficient of block j.
struct TileUnit {
  __m256i codes[8];
  __m256 wsc;
  __m256 mcoef;
};

// Whether Dec has a LoadTail(p, blocks, u) (Q4_0) or a PrepareTail(p,
// blocks) (the table types with blocks of 32) for the groups of a row past
// its last whole unit; the other types' rows are whole units.
template <typename Dec>
inline constexpr bool kLoadsTail = requires(const uint8_t* p, TileUnit* u) {
  Dec::LoadTail(p, 0, u);
};
template <typename Dec>
inline constexpr bool kPreparesTail = requires(const uint8_t* p) {
  Dec::PrepareTail(p, 0);
};

// The blocks of a row of `cols` past its last whole unit (p: the first),
// prefetched, or 0 for none. The loops run them as one more unit, partial,
// through the same step as a whole unit's on the activation's zero-padded
// last unit, into the row's own sums. (They went through a group loop of
// their own, a float sum per row apart, before.)
template <typename Dec>
[[gnu::always_inline]] inline int TailBlocks(const uint8_t* p, int64_t cols) {
  if constexpr (kLoadsTail<Dec> || kPreparesTail<Dec>) {
    const int blocks = static_cast<int>(cols / 32 % 8);
    if (blocks != 0) {
      PrefetchAhead<Dec::kUnitBytes / 2>(p);
      if (blocks > 4) PrefetchAhead<Dec::kUnitBytes / 2>(p + Dec::kUnitBytes / 2);
    }
    return blocks;
  }
  return 0;
}

// From one unit of a row to its next: a grouped row of a kInterleaved view
// interleaves its units with its group's (the decoders of those layouts
// have a kUnitStride).
template <typename Dec>
inline constexpr int64_t kUnitStep = [] {
  if constexpr (requires { Dec::kUnitStride; }) return Dec::kUnitStride;
  return Dec::kUnitBytes;
}();

// The loops of each decoder family, defined with it (matmul_avx2.cc:
// SumTile, SumTile16; matmul_avx2_table.cc: SumTileTable), declared here for
// the drivers below.
template <typename Dec, int NB>
[[gnu::always_inline]] inline void SumTile(const uint8_t* row, int64_t cols,
                                           const QuantizedActs* acts, __m256* acc_out,
                                           __m256* bias_out);
template <typename Dec, int NB>
inline void DotTile(const uint8_t* row, int64_t cols, const QuantizedActs* acts, float* out);
template <typename Dec, int NB>
[[gnu::always_inline]] inline void SumTile16(const uint8_t* row, int64_t cols,
                                             const QuantizedActs* acts, __m256* acc_out,
                                             __m256* bias_out);
template <typename Dec, int NB>
inline void DotTile16(const uint8_t* row, int64_t cols, const QuantizedActs* acts, float* out);
template <typename Dec, int NB>
[[gnu::always_inline]] inline void SumTileTable(const uint8_t* row, int64_t cols,
                                                const QuantizedActs* acts, __m256* acc_out);
template <typename Dec, int NB>
inline void DotTileTable(const uint8_t* row, int64_t cols, const QuantizedActs* acts, float* out);

// The kInterleaveRows rows of a group of an interleaved view against one
// activation vector, as one stream (matmul_avx2.cc: the TileUnit decoders';
// matmul_avx2_table.cc: the table types').
template <typename Dec>
inline void DotTileGroup(const uint8_t* group, int64_t cols, const QuantizedActs& a, float* out);
template <typename Dec>
inline void DotTableGroup(const uint8_t* group, int64_t cols, const QuantizedActs& a, float* out);

template <typename Dec, int NB>
inline void DotAny(const uint8_t* row, int64_t cols, const QuantizedActs* acts, float* out) {
  if constexpr (requires { Dec::kSigned; }) {
    DotTileTable<Dec, NB>(row, cols, acts, out);
  } else if constexpr (requires { typename Dec::Prep; }) {
    DotTile16<Dec, NB>(row, cols, acts, out);
  } else {
    DotTile<Dec, NB>(row, cols, acts, out);
  }
}

// Loop order: a block of weight rows small enough to stay in L2 is run
// against each tile of activation vectors in turn, and the tile is as many
// vectors as fit in about half of L1 (their qp, ds, zs and s32 are read once
// per weight row), so that neither stream spills to the next cache level.
// The order changes which vector is computed when, never how.
inline constexpr int64_t kRowBlockBytes = 96 << 10;
inline constexpr int64_t kActTileBytes = 24 << 10;

// A decode step's rows of a kRows view, 4 at a time: each row's sums as
// DotAny<Dec, 1> makes them, then one HorizontalSums4 per accumulator for the
// 4 (short rows, a MoE expert's few hundred columns, spent much of their time
// in a row's own reductions and calls); each row to the bit DotAny<Dec, 1>'s.
template <typename Dec>
inline void RowQuads(const RowsTask& t, int64_t begin, int64_t end) {
  constexpr bool kTable = requires { Dec::kSigned; };
  constexpr bool kPer16 = !kTable && requires { typename Dec::Prep; };
  const int64_t cols = t.w.cols;
  int64_t r = begin;
  for (; r + 4 <= end; r += 4) {
    __m256 acc[4], bias[4];
    for (int i = 0; i < 4; ++i) {
      const uint8_t* row = RowStart(t.w, r + i);
      if constexpr (kTable) {
        SumTileTable<Dec, 1>(row, cols, t.acts, &acc[i]);
      } else if constexpr (kPer16) {
        SumTile16<Dec, 1>(row, cols, t.acts, &acc[i], &bias[i]);
      } else {
        SumTile<Dec, 1>(row, cols, t.acts, &acc[i], &bias[i]);
      }
    }
    __m128 sums = HorizontalSums4(acc);
    if constexpr (kPer16) {
      sums = _mm_add_ps(sums, HorizontalSums4(bias));
    } else if constexpr (!kTable) {
      if constexpr (Dec::kMin) sums = _mm_sub_ps(sums, HorizontalSums4(bias));
    }
    _mm_storeu_ps(t.y + r, sums);
  }
  for (; r < end; ++r) DotAny<Dec, 1>(RowStart(t.w, r), cols, t.acts, t.y + r);
}

template <typename Dec>
inline void RowsOf(const RowsTask& t, int64_t begin, int64_t end) {
  if constexpr (!requires { Dec::kUnitStride; }) {
    if (t.batch == 1) return RowQuads<Dec>(t, begin, end);
  }
  float out[kTile];
  const int64_t units = std::max<int64_t>(1, t.w.cols / 256);
  const int64_t tile = std::clamp<int64_t>(kActTileBytes / (units * 416), 2, kTile);
  const int64_t block_rows = std::max<int64_t>(1, kRowBlockBytes / t.w.row_stride_bytes);
  for (int64_t r0 = begin; r0 < end; r0 += block_rows) {
    const int64_t r1 = std::min(end, r0 + block_rows);
    for (int64_t b0 = 0; b0 < t.batch; b0 += tile) {
      const int nb = static_cast<int>(std::min<int64_t>(tile, t.batch - b0));
      const QuantizedActs* a = t.acts + b0;
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = RowStart(t.w, r);
        switch (nb) {
#define WASTE_TILE_CASE(N)                 \
  case N:                                  \
    DotAny<Dec, N>(row, t.w.cols, a, out); \
    break;
          WASTE_TILE_CASE(1)
          WASTE_TILE_CASE(2)
          WASTE_TILE_CASE(3)
          WASTE_TILE_CASE(4)
          WASTE_TILE_CASE(5)
          WASTE_TILE_CASE(6)
          WASTE_TILE_CASE(7)
          default:
            DotAny<Dec, 8>(row, t.w.cols, a, out);
            break;
#undef WASTE_TILE_CASE
        }
        for (int k = 0; k < nb; ++k) t.y[(b0 + k) * t.y_stride + r] = out[k];
      }
    }
  }
}

// A type with an interleaved layout: its grouped rows through Grouped (whole
// groups at once for a decode step's few vectors), the rest through Plain.
template <typename Grouped, typename Plain>
void GroupedOrRows(const RowsTask& t, int64_t begin, int64_t end) {
  SplitGroupedRows(
      t.w, begin, end,
      [&](int64_t b, int64_t e) {
        // Batches past kGroupMaxBatch share each unit's decode across a
        // tile of vectors instead (RowsOf).
        if (t.batch > kGroupMaxBatch) return RowsOf<Grouped>(t, b, e);
        RunGroups(
            t, b, e,
            [&](const uint8_t* group, const QuantizedActs& a, float* out) {
              if constexpr (requires { Grouped::kSigned; }) {
                DotTableGroup<Grouped>(group, t.w.cols, a, out);
              } else {
                DotTileGroup<Grouped>(group, t.w.cols, a, out);
              }
            },
            [&](int64_t rb, int64_t re) { RowsOf<Grouped>(t, rb, re); });
      },
      [&](int64_t b, int64_t e) { RowsOf<Plain>(t, b, e); });
}

// RowsOf for IQ4_NL, IQ4_XS and MXFP4 (matmul_avx2_table.cc).
void RowsTable(const RowsTask& t, int64_t begin, int64_t end);

}  // namespace waste::kernels::internal::WASTE_AVX2_NS::tiled

#endif  // WASTE_DAEMON_KERNELS_MATMUL_AVX2_INTERNAL_H_
