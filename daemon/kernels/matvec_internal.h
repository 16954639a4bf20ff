// The interface between matvec.cc (validation, activation quantization,
// threading) and the per-ISA loops in matvec_{scalar,avx2,avx512}.cc.
// Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_MATVEC_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_MATVEC_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "daemon/kernels/matvec.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels::internal {

// One MatMul, already validated: rows [begin, end) are the unit of work.
struct RowsTask {
  WeightView w;
  int64_t batch = 1;
  const float* x = nullptr;  // f32 activations, for F32/F16/BF16 weights.
  int64_t x_stride = 0;
  const QuantizedActs* acts = nullptr;  // [batch], for the quantized types.
  float* y = nullptr;
  int64_t y_stride = 0;
  // The matrix-unit loops' activation tiles (amx::PrepareActs), made from
  // acts once per call; null on the vector path.
  const uint8_t* matrix_acts = nullptr;
};

// Activation vectors one pass over a weight row serves (the SIMD loops keep
// this many accumulator sets in registers).
inline constexpr int kRowTile = 4;

// Rows a block of RunRowTiles passes over per tile of activation vectors:
// the tile's activations stay in L1 across the block, the block's weight rows
// in L2 across the tiles (at batch 64 the activations alone outgrow L2).
inline constexpr int64_t kRowBlock = 8;

// The kInterleaved layout (see WeightLayout): per row and unit of 256
// columns, its 8 blocks' f16 scales (kUnitScaleBytes), then their quants.
inline constexpr int kUnitScaleBytes = 16;

// Q4_K's unit is one super-block of 144 bytes: d, dmin and the 12 bytes of
// packed scales as GGUF has them (kQ4KHeaderBytes), then its 256 4-bit codes;
// in kInterleavedLanes those are re-paired into the code order of the tiled
// AVX2 loop: in chunk c < 4 of 32 bytes, byte 4j + b holds in its low nibble
// the code of element Q4KLaneElem(c, j, b) of group Q4KLaneGroup(j), in its
// high nibble that of element Q4KLaneElem(c + 4, j, b) of the same group.
// (GGUF pairs groups 2p and 2p + 1 in a byte, which that loop has to
// transpose and shift apart.)
inline constexpr int kQ4KHeaderBytes = 16;
// The 4-bit types of 8 groups of 16 code bytes per unit in kInterleavedLanes
// (Q4_0, IQ4_NL, IQ4_XS, MXFP4): a header (LaneHeaderBytes: Q4_0's and
// IQ4_NL's 8 f16 scales, IQ4_XS's own 8 bytes, MXFP4's 8 E8M0 exponents),
// then 4 chunks of 32 bytes where chunk c
// holds code bytes 4c .. 4c + 3 of group j at 4j: the dword transpose of the
// tiled AVX2 loop, made once at load. The byte after the header that holds
// code byte i of group j:
inline constexpr int LaneCodeByte(int j, int i) { return 32 * (i / 4) + 4 * j + i % 4; }
inline constexpr int LaneHeaderBytes(WeightType type) {
  return type == WeightType::kIQ4_XS || type == WeightType::kMXFP4 ? 8 : kUnitScaleBytes;
}
// The unit byte that holds qs byte i of block j (Q4_0, IQ4_NL).
inline constexpr int Q4_0LaneByte(int j, int i) { return kUnitScaleBytes + LaneCodeByte(j, i); }
inline constexpr int Q4KLaneGroup(int j) { return j < 4 ? 2 * j : 2 * (j - 4) + 1; }
inline constexpr int Q4KLaneElem(int i, int j, int b) { return 4 * (j < 4 ? i : (i + 4) % 8) + b; }

// The 12 packed scale bytes of a K-type super-block (Q3_K, Q4_K, Q5_K),
// unpacked in 64-bit integer registers, two scales' worth of bits per op and
// off the vector ports, into two words of 8 bytes each.
struct KScaleWords {
  uint64_t lo, hi;
};
[[gnu::always_inline]] inline KScaleWords UnpackKScales(const uint8_t* scales, bool q3) {
  const uint64_t w01 = LoadU64(scales);
  const uint64_t w2 = LoadU32(scales + 8);
  constexpr uint64_t kNib = 0x0F0F0F0F0F0F0F0F, kTwo = 0x0303030303030303;
  if (q3) {
    return {(w01 & kNib) | (((w2 | ((w2 >> 2) << 32)) & kTwo) << 4),
            ((w01 >> 4) & kNib) | ((((w2 >> 4) | ((w2 >> 6) << 32)) & kTwo) << 4)};
  }
  return {w01 & 0x3F3F3F3F3F3F3F3F, ((w2 | ((w2 >> 4) << 32)) & kNib) | (((w01 >> 6) & kTwo) << 4)};
}
// Q3_K's 16 6-bit scales, unsigned (before the -32), as bytes: word 0 holds
// scales 0-7, word 1 scales 8-15. Scale j is the low (j < 8) or high nibble
// of byte j % 8, with bits 2 (j / 4), +1 of byte 8 + j % 4 as bits 4-5.
[[gnu::always_inline]] inline KScaleWords UnpackQ3KScales(const uint8_t* scales) {
  return UnpackKScales(scales, true);
}
// Q4_K's and Q5_K's 8 6-bit scales and 8 6-bit mins: lo holds the bytes
// sc0-3 then m0-3, hi sc4-7 then m4-7.
[[gnu::always_inline]] inline KScaleWords UnpackQ4KScales(const uint8_t* scales) {
  return UnpackKScales(scales, false);
}

// The file bytes of a unit of a grouped row (UnitBytes(type) of them), read
// back from `layout`: the reference decode of the interleaved layouts.
void UninterleaveUnit(WeightType type, WeightLayout layout, const uint8_t* unit,
                      uint8_t* file_bytes);

// Rows [0, InterleavedRows(w)) sit in groups; the rest as kRows.
[[gnu::always_inline]] inline int64_t InterleavedRows(const WeightView& w) {
  return w.layout != WeightLayout::kRows ? w.rows / kInterleaveRows * kInterleaveRows : 0;
}

// Bytes of one row's unit of 256 columns, in either layout.
[[gnu::always_inline]] inline int64_t UnitBytes(WeightType type) {
  const WeightTypeInfo info = GetWeightTypeInfo(type);
  return 256 / info.block_elems * info.block_bytes;
}

// Bytes from one unit of a grouped row to its next.
[[gnu::always_inline]] inline int64_t InterleavedUnitStride(WeightType type) {
  return kInterleaveRows * UnitBytes(type);
}

// Where row r starts: its first unit in a group, or the kRows row.
[[gnu::always_inline]] inline const uint8_t* RowStart(const WeightView& w, int64_t r) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  if (r >= InterleavedRows(w)) return base + r * w.row_stride_bytes;
  return base + (r - r % kInterleaveRows) * w.row_stride_bytes +
         r % kInterleaveRows * UnitBytes(w.type);
}

// Calls grouped(b, e) for the rows of [begin, end) that sit in groups and
// plain(b, e) for the rest (the kRows tail, or all rows of a kRows view).
template <typename GroupedFn, typename PlainFn>
inline void SplitGroupedRows(const WeightView& w, int64_t begin, int64_t end, GroupedFn grouped,
                             PlainFn plain) {
  const int64_t split = std::clamp(InterleavedRows(w), begin, end);
  if (begin < split) grouped(begin, split);
  if (split < end) plain(split, end);
}

// The largest batch the group loops (RunGroups) take: they run a group
// once per activation vector, decoding its units each time, which a decode
// step's few vectors pay for in the steadier stream; larger batches (prefill)
// run the per-row tiles, which decode a unit once per tile of vectors.
inline constexpr int64_t kGroupMaxBatch = 4;

// Runs rows [begin, end) of the grouped part of a kInterleaved task: each
// whole group through dot_group(group, acts, out[kInterleaveRows]) (group:
// its first row's RowStart) once per activation vector, and the rows of a
// group that [begin, end) cuts (RunTasks keeps that rare) through
// rows(b, e), the per-row loop. Each (row, vector) comes out the same
// either way.
template <typename GroupFn, typename RowsFn>
inline void RunGroups(const RowsTask& t, int64_t begin, int64_t end, GroupFn dot_group,
                      RowsFn rows) {
  constexpr int kR = kInterleaveRows;
  const int64_t first = std::min(end, (begin + kR - 1) / kR * kR);
  const int64_t last = std::max(first, end / kR * kR);
  if (begin < first) rows(begin, first);
  float out[kR];
  for (int64_t r0 = first; r0 < last; r0 += kR) {
    const uint8_t* group = RowStart(t.w, r0);
    for (int64_t b = 0; b < t.batch; ++b) {
      dot_group(group, t.acts[b], out);
      for (int i = 0; i < kR; ++i) t.y[b * t.y_stride + r0 + i] = out[i];
    }
  }
  if (last < end) rows(last, end);
}

// Runs rows [begin, end) of `t` in passes of up to kRowTile activation
// vectors, calling dot_row(std::integral_constant<int, NB>, row, b0, out)
// to fill out[0..NB) and storing the results. Shared by the ISA files, each
// of which instantiates it with its own kernel (and compile flags). Each
// (row, vector) is computed the same way whatever the batch and order.
template <typename DotRowFn>
inline void RunRowTiles(const RowsTask& t, int64_t begin, int64_t end, DotRowFn dot_row) {
  float out[kRowTile];
  for (int64_t r0 = begin; r0 < end; r0 += kRowBlock) {
    const int64_t r1 = std::min(end, r0 + kRowBlock);
    for (int64_t b0 = 0; b0 < t.batch; b0 += kRowTile) {
      const int64_t nb = std::min<int64_t>(kRowTile, t.batch - b0);
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = RowStart(t.w, r);
        switch (nb) {
          case 1:
            dot_row(std::integral_constant<int, 1>(), row, b0, out);
            break;
          case 2:
            dot_row(std::integral_constant<int, 2>(), row, b0, out);
            break;
          case 3:
            dot_row(std::integral_constant<int, 3>(), row, b0, out);
            break;
          default:
            dot_row(std::integral_constant<int, 4>(), row, b0, out);
            break;
        }
        for (int64_t k = 0; k < nb; ++k) t.y[(b0 + k) * t.y_stride + r] = out[k];
      }
    }
  }
}

// MXFP4's codes in the unsigned form of the integer dots (see Group in
// matvec_scalar.cc): its doubled E2M1 values -12..12 plus 12, and the zero
// point -12 x the scale goes to the activation sums. (IQ4's 128 would do
// too, but a zero point ten times the weights' magnitude costs f32 digits.)
inline constexpr int kMxfp4CodeOffset = 12;

// kPrefetchBytes (matvec.h): how far ahead the loops read.

// Asks for the lines kPrefetchBytes past the kBytes at p (prefetcht0 in every
// ISA's build, so one definition serves them all).
template <int kBytes>
[[gnu::always_inline]] inline void PrefetchAhead(const void* p) {
  if constexpr (kPrefetchBytes > 0) {
#pragma GCC unroll 8
    for (int l = 0; l < (kBytes + 63) / 64; ++l)
      __builtin_prefetch(static_cast<const char*>(p) + kPrefetchBytes + 64 * l, 0, 3);
  }
}

struct IsaKernels {
  // Quantizes one activation vector (cols a multiple of 32) for a dot with
  // weights of `type` (the AVX-512 loops read it in a per-type order).
  void (*quantize_acts)(WeightType type, const float* x, int64_t cols, const QuantizedActs& out);
  // y for rows [begin, end) of the task, all batch entries.
  void (*rows)(const RowsTask& task, int64_t begin, int64_t end);
};

const IsaKernels& ScalarKernels();
const IsaKernels& Avx512Kernels();

// The AVX2 loops, compiled twice: for kAvx2 in namespace avx2, and with
// AVX-VNNI for kAvxVnni in namespace avxvnni (avx2_variant.h).
namespace avx2 {
const IsaKernels& Kernels();
// The register-tiled kernels (matmul_avx2.cc), which decode each unit of
// weights once for up to 8 activation vectors, for the types that have them;
// null for the others. Batch 1 runs them too, so that a row's result never
// depends on its batch.
const IsaKernels* TiledKernels(WeightType type);
}  // namespace avx2
namespace avxvnni {
const IsaKernels& Kernels();
const IsaKernels* TiledKernels(WeightType type);
}  // namespace avxvnni

// The matrix-unit (AMX-INT8) loops, matmul_amx.cc; run only where
// MatrixUnitAvailable().
namespace amx {
// The loops for `type` (their quantize_acts is the AVX-512 one: they read
// its qs and d), or null where there are none.
const IsaKernels* Kernels(WeightType type);
// Rows of a tile, and activation vectors of a tile.
inline constexpr int kTile = 16;
// Rows of a task go to them in multiples of this (two tiles), but for the
// matrix's last ones.
inline constexpr int64_t kRowStep = 2 * kTile;
// PrepareActs' layout: per tile of vectors and block, the codes' tile (8
// rows of 64 bytes), then the 16 vectors' block scales d, then their s32.
inline constexpr int kActsTileBytes = 512;
inline constexpr int kActsBlockBytes = kActsTileBytes + 2 * kTile * sizeof(float);
// Bytes PrepareActs writes for `batch` vectors of `cols`.
size_t ActsBytes(int64_t cols, int64_t batch);
// The batch's quantized vectors as the tiles the loops load: per tile of 16
// vectors (absent ones zero) and block of 32, 8 rows of 64 bytes, row k
// holding bytes 4k .. 4k + 3 of each vector's block (the order of
// tdpbssd's second operand), then the 16 vectors' d and s32. `out`
// 64-byte aligned. Plain C++ (matmul_amx_acts.cc): it runs anywhere.
void PrepareActs(const QuantizedActs* acts, int64_t batch, int64_t cols, uint8_t* out);
}  // namespace amx

// The matrix-unit arithmetic in plain C++, the reference its loops match to
// the bit: per 32-element block b in order, from acc = 0,
//   acc = fma(float(integer dot of the block's codes), weight scale x d, acc)
// and for the types whose codes are unsigned with a min (Q4_1, Q5_1: m;
// Q4_K, Q5_K: -(dmin x the group's min)),
//   acc = fma(min coefficient, s32, acc).
// Q8_0, Q4_0 and Q5_0 (weight scale: the block's d; codes less 128, 8, 16),
// Q4_1 and Q5_1 (d), Q4_K and Q5_K (d x the group's scale), Q6_K (codes less
// 32; a block is two parts of 16, each its own fma with d x its scale), and
// IQ4_NL, IQ4_XS and MXFP4 (codes: their table's values; IQ4_XS's weight
// scale d x the group's scale), rows as GGUF has them.
float DotBlocksSequentialRef(WeightType type, const void* row, int64_t cols,
                             const QuantizedActs& acts);

// The integer dot of the quantized types, one 32-element group at a time, in
// plain C++: the reference the SIMD loops implement, and their tail for rows
// whose length is not a multiple of their unroll. Returns
//   sum over groups g in [g_begin, g_end) of dot(weights of g, acts of g).
// `row` points at the row start; group g covers elements [32g, 32g + 32).
float DotGroupsRef(WeightType type, const void* row, int64_t g_begin, int64_t g_end,
                   const QuantizedActs& acts);

// DotGroupsRef of a grouped row of a kInterleaved view: `row` is its first
// unit (RowStart), each next one unit_stride bytes on.
float DotGroupsInterleavedRef(WeightType type, WeightLayout layout, const uint8_t* row,
                              int64_t unit_stride, int64_t g_begin, int64_t g_end,
                              const QuantizedActs& acts);

}  // namespace waste::kernels::internal

#endif  // WASTE_DAEMON_KERNELS_MATVEC_INTERNAL_H_
