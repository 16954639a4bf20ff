// The unit-of-256 loop the AVX-512 files share (see matvec_avx512.cc's header
// comment): a type's decoder fills a Unit per 256 elements, DotQuantized
// multiplies it into every activation vector of the tile. Included only by
// the translation units compiled with AVX512_COPTS (matvec_avx512*.cc).
// Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_MATVEC_AVX512_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_MATVEC_AVX512_INTERNAL_H_

#ifndef __AVX512VNNI__
#error "matvec_avx512_internal.h needs the AVX-512 compile flags (AVX512_COPTS)"
#endif

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "daemon/kernels/matvec_internal.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels::internal::avx512 {

inline constexpr int kMaxNb = kRowTile;

// How a type's loop wants the activation's int8 values laid out (qp).
enum class ActOrder {
  kNatural,   // As qs.
  kNibble32,  // Per 128: the first 16 of each of 4 blocks, then their last 16.
  kNibbleK,   // Per 256, 16-element runs: group 0 to 7 first halves (even groups
              // then odd), then second halves: see QuantizeActsAvx512.
  // Per 256, for Q2_K and Q3_K: int32 lane L = 4k + p of every zmm belongs
  // to 16-element sub-block Lane16SubBlock(L) (DotLane16): zmm v, lane L,
  // byte b is element 128 (k / 2) + 32 p + 16 (k % 2) + 4 (p ^ v) + b,
  // the element whose weight code Q23K finds there. ds holds 32 floats per 256
  // instead of [d x8 | s32 x8]: per lane the d of its group divided by the
  // factor its codes carry (Lane16Factor), then its sub-block's s16.
  kLane16,
  // Per 128, for Q6_K: zmm h, lane L holds elements 16 (L / 2) + 8 h +
  // 4 (L % 2) .. + 3 (see Q6K in matvec_avx512.cc).
  kPairs16,
  // Per 128, for Q8_0: zmm h, lane L holds elements 32 (L / 4) + 16 h +
  // 4 (L % 4) .. + 3 (PairHalves32 in matvec_avx512.cc).
  kHalves32,
};

// kLane16: the sub-block of lane L = 4k + p (2-bit field p of 128-bit lane k
// of a Q2_K/Q3_K block's qs), and the power of 2 its codes are scaled by
// where they lie in the byte (Q3_K's field 3 moves down 2 bits, so that its
// high bit fits).
constexpr int Lane16SubBlock(int lane) {
  const int k = lane / 4, p = lane % 4;
  return 8 * (k / 2) + 2 * p + k % 2;
}
constexpr float Lane16Factor(bool q3, int lane) {
  const int p = lane % 4;
  return q3 && p == 3 ? 16.0f : static_cast<float>(1 << (2 * p));
}

// 256 elements of a row, decoded for the integer dot.
struct Unit {
  __m512i codes[4];  // u8, in the activation's order.
  // 32-element groups: lanes 0-7 the weight scale of each group, lanes 8-15
  // the coefficient of its activation sum (s32) divided by Dec::kSumScale,
  // which multiplies the row's sum of those terms once at the end. Q6_K,
  // Q3_K: the weight scale of each 16 elements (the coefficients of s16 too,
  // times kSumScale).
  __m512 wsc;
  // Q2_K only (kOwnCoef): each 16 elements' coefficient of s16, divided by
  // kSumScale, where it is not a constant multiple of the weight scale.
  __m512 coef;
};

template <typename Dec>
inline constexpr bool kOwnCoef = requires {
  requires Dec::kOwnCoef;
};

// Lane l of lane vector v takes scale slot kSlots[v][l].
using SlotTable = std::array<std::array<int32_t, 16>, 4>;

// The two slot tables most decoders' lane pairs use: a scale per 32
// elements, lane L of pair v's zmm in group 4 v + L / 4 (kHalves32 and
// kNibble32 orders); a scale per 16, sub-block 8 v + L / 2 (kPairs16).
inline constexpr SlotTable kHalves32Slots = [] {
  SlotTable t{};
  for (int v = 0; v < 2; ++v)
    for (int l = 0; l < 16; ++l) t[v][l] = 4 * v + l / 4;
  return t;
}();
inline constexpr SlotTable kPairs16Slots = [] {
  SlotTable t{};
  for (int v = 0; v < 2; ++v)
    for (int l = 0; l < 16; ++l) t[v][l] = 8 * v + l / 2;
  return t;
}();

// Repeats each of 8 floats twice: per 32-element group -> per 16 elements.
[[gnu::always_inline]] inline __m512 Dup8To16(__m256 v) {
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                               _mm512_castps256_ps512(v));
}

// kPairs16 (Q6_K, the codebook types with a scale per 16): of 128 bytes in two zmm, zmm h takes
// dwords 4 (L / 2) + 2 h + L % 2 (the 4 + 4 bytes of sub-block L / 2 that half h of each 16 holds).
[[gnu::always_inline]] inline __m512i Pairs16Index(int h) {
  alignas(64) static constexpr auto kIndex = [] {
    std::array<std::array<int32_t, 16>, 2> t{};
    for (int i = 0; i < 2; ++i)
      for (int l = 0; l < 16; ++l) t[i][l] = 4 * (l / 2) + 2 * i + l % 2;
    return t;
  }();
  return _mm512_load_si512(kIndex[h].data());
}

// kHalves32 (Q8_0, the codebook types with a scale per 32): of two zmm holding blocks 0-1 and 2-3
// of 32 bytes, zmm h takes bytes 16 h .. 16 h + 15 of each of the 4 (one vpermt2q each).
[[gnu::always_inline]] inline void PairHalves32(__m512i* first, __m512i* second) {
  const __m512i x = *first, y = *second;
  *first = _mm512_permutex2var_epi64(x, _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), y);
  *second = _mm512_permutex2var_epi64(x, _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15), y);
}

// A decoder with kPairAfterLoad makes its codes in natural order and has
// them re-paired here (kHalves32 or kPairs16, as its kOrder says) so that its
// two zmm of each pair share their lanes' scale groups (kLaneVecs 2).
template <typename Dec>
[[gnu::always_inline]] inline void PairCodes(Unit* u) {
  if constexpr (requires { requires Dec::kPairAfterLoad; }) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      if constexpr (Dec::kOrder == ActOrder::kHalves32) {
        PairHalves32(&u->codes[2 * h], &u->codes[2 * h + 1]);
      } else {
        static_assert(Dec::kOrder == ActOrder::kPairs16);
        const __m512i first = u->codes[2 * h], second = u->codes[2 * h + 1];
        u->codes[2 * h] = _mm512_permutex2var_epi32(first, Pairs16Index(0), second);
        u->codes[2 * h + 1] = _mm512_permutex2var_epi32(first, Pairs16Index(1), second);
      }
    }
  }
}

// The accumulators of one row against one activation vector: one per zmm of
// lanes (one alone would chain the fmas of a unit through its latency) and
// the group-sum terms.
template <typename Dec>
struct RowSums {
  __m512 acc[Dec::kLaneVecs];
  __m512 bias;
  RowSums() {
    bias = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int v = 0; v < Dec::kLaneVecs; ++v) acc[v] = _mm512_setzero_ps();
  }
};

// The lane-to-scale permutations of Dec, in registers.
template <typename Dec>
struct Slots {
  __m512i v[Dec::kLaneVecs];
  Slots() {
#pragma GCC unroll 16
    for (int i = 0; i < Dec::kLaneVecs; ++i) v[i] = _mm512_loadu_si512(Dec::kSlots[i].data());
  }
};

// Unit `un` of a row, decoded in u, times activation vector a into s. A
// row's partial last unit (LoadTail) runs only its first lane_vecs lane
// vectors, those that hold its blocks.
template <typename Dec>
[[gnu::always_inline]] inline void AccumulateUnit(const Unit& u, const QuantizedActs& a, int64_t un,
                                                  const Slots<Dec>& slots, RowSums<Dec>* s,
                                                  int lane_vecs = Dec::kLaneVecs) {
  constexpr int kLanes = Dec::kLaneVecs;
  const int8_t* q = (Dec::kOrder == ActOrder::kNatural ? a.qs : a.qp) + 256 * un;
  __m512 scale;
  if constexpr (Dec::kPer16) {
    scale = _mm512_mul_ps(u.wsc, Dup8To16(_mm256_load_ps(a.d + 8 * un)));
    s->bias =
        _mm512_fmadd_ps(kOwnCoef<Dec> ? u.coef : u.wsc, _mm512_loadu_ps(a.s16 + 16 * un), s->bias);
  } else {
    // Lanes 0-7: weight x activation scale; 8-15: coef x group sum.
    scale = _mm512_mul_ps(u.wsc, _mm512_load_ps(a.ds + 16 * un));
    s->bias = _mm512_mask_add_ps(s->bias, 0xFF00, s->bias, scale);
  }
#pragma GCC unroll 16
  for (int v = 0; v < kLanes; ++v) {
    if (v >= lane_vecs) break;
    __m512i dot;
    if constexpr (kLanes == 2) {
      dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.codes[2 * v],
                                _mm512_load_si512(q + 128 * v));
      dot = _mm512_dpbusd_epi32(dot, u.codes[2 * v + 1], _mm512_load_si512(q + 128 * v + 64));
    } else {
      dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.codes[v], _mm512_load_si512(q + 64 * v));
    }
    s->acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(slots.v[v], scale),
                                s->acc[v]);
  }
}

// The row's accumulators added into one vector.
template <typename Dec>
[[gnu::always_inline]] inline __m512 RowVector(const RowSums<Dec>& s) {
  __m512 sum = _mm512_mul_ps(s.bias, _mm512_set1_ps(Dec::kSumScale));
#pragma GCC unroll 16
  for (int v = 0; v < Dec::kLaneVecs; ++v) sum = _mm512_add_ps(sum, s.acc[v]);
  return sum;
}

// The row's dot from its accumulators.
template <typename Dec>
[[gnu::always_inline]] inline float FinishRow(const RowSums<Dec>& s) {
  return _mm512_reduce_add_ps(RowVector(s));
}

// FinishRow of 4 rows at once: the same additions in the same order as
// _mm512_reduce_add_ps's (halves of 256, then of 128, then within 128: (x0 +
// x2) + (x1 + x3)), each step for all 4 rows in one instruction, so each
// out[r] is FinishRow(s[r]) to the bit.
// v[r]: RowVector of row r.
[[gnu::always_inline]] inline void FinishRows4(const __m512* v, float* out) {
  // [hi256 + lo256 of row 0 | of row 1], [of row 2 | of row 3].
  const __m512 p01 =
      _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], 0xEE), _mm512_shuffle_f32x4(v[0], v[1], 0x44));
  const __m512 p23 =
      _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], 0xEE), _mm512_shuffle_f32x4(v[2], v[3], 0x44));
  // 128-bit lane r: hi128 + lo128 of row r.
  const __m512 q =
      _mm512_add_ps(_mm512_shuffle_f32x4(p01, p23, 0xDD), _mm512_shuffle_f32x4(p01, p23, 0x88));
  const __m512 h = _mm512_add_ps(q, _mm512_permute_ps(q, 0x4E));  // x0 + x2, x1 + x3.
  const __m512 t = _mm512_add_ps(h, _mm512_permute_ps(h, 0x11));  // Element 0: the row's dot.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, t);
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) out[r] = lanes[4 * r];
}

// Whether Dec has a Load2(p, unit_stride, u) that decodes the units at p and
// p + unit_stride into u[0], u[1] at once (the IQ2 types: the 32 codebook
// lookups of one unit fill half of a byte-wide lookup).
template <typename Dec>
inline constexpr bool kLoadsPairs = requires(const uint8_t* p, Unit* u) {
  Dec::Load2(p, int64_t{0}, u);
};

// Whether Dec has a LoadTail(p, blocks, u) for the groups of a row past its
// last whole unit (the 32-element-block types; the others' rows are whole
// units).
template <typename Dec>
inline constexpr bool kLoadsTail = requires(const uint8_t* p, Unit* u) {
  Dec::LoadTail(p, 0, u);
};

// The blocks of a row of `cols` past its `units` whole ones, decoded into u
// as one more unit, partial (LoadTail), and its lane vectors that hold them;
// 0 for none. The loops run it through the same AccumulateUnit as a whole
// unit, on the activation's zero-padded last unit, into the row's own sums
// (one reduction for the row). These groups went through an AVX2 group loop
// of their own before: in cache, Zen 5, batch 1, rows of 128 columns (MLA's
// attn_k_b) ran 1.3x (Q8_0) to 2x (Q4_0) faster this way.
template <typename Dec>
[[gnu::always_inline]] inline int LoadTailUnit(const uint8_t* row, int64_t cols, int64_t units,
                                               int64_t unit_stride, Unit* u) {
  if constexpr (kLoadsTail<Dec>) {
    const int blocks = static_cast<int>(cols / 32 % 8);
    if (blocks == 0) return 0;
    const uint8_t* p = row + units * unit_stride;
    // Half a unit's worth of prefetch per half read, as the unit loop does
    // (rows of 128 columns are nothing but this).
    PrefetchAhead<Dec::kUnitBytes / 2>(p);
    if (blocks > 4) PrefetchAhead<Dec::kUnitBytes / 2>(p + Dec::kUnitBytes / 2);
    Dec::LoadTail(p, blocks, u);
    PairCodes<Dec>(u);
    return (blocks + 3) / 4;
  }
  return 0;
}

// `unit_stride`: bytes from one unit of the row to the next (a grouped row
// of a kInterleaved view interleaves its units with its group's). A decoder
// with Load2 decodes the units two at a time; each row still takes them in
// order, so its sums are those of one unit at a time.
template <typename Dec, int NB>
inline void DotQuantized(const uint8_t* row, int64_t cols, const QuantizedActs* acts, float* out,
                         int64_t unit_stride = Dec::kUnitBytes) {
  const int64_t units = cols / 256;
  RowSums<Dec> sums[NB];
  const Slots<Dec> slots;
  int64_t un = 0;
  if constexpr (kLoadsPairs<Dec>) {
    for (; un + 2 <= units; un += 2) {
      PrefetchAhead<Dec::kUnitBytes>(row + un * unit_stride);
      PrefetchAhead<Dec::kUnitBytes>(row + (un + 1) * unit_stride);
      Unit u[2];
      Dec::Load2(row + un * unit_stride, unit_stride, u);
      PairCodes<Dec>(&u[0]);
      PairCodes<Dec>(&u[1]);
#pragma GCC unroll 16
      for (int k = 0; k < NB; ++k) {
        AccumulateUnit<Dec>(u[0], acts[k], un, slots, &sums[k]);
        AccumulateUnit<Dec>(u[1], acts[k], un + 1, slots, &sums[k]);
      }
    }
  }
  for (; un < units; ++un) {
    PrefetchAhead<Dec::kUnitBytes>(row + un * unit_stride);
    Unit u;
    Dec::Load(row + un * unit_stride, &u);
    PairCodes<Dec>(&u);
#pragma GCC unroll 16
    for (int k = 0; k < NB; ++k) AccumulateUnit<Dec>(u, acts[k], un, slots, &sums[k]);
  }
  if (Unit u; const int lane_vecs = LoadTailUnit<Dec>(row, cols, units, unit_stride, &u)) {
#pragma GCC unroll 16
    for (int k = 0; k < NB; ++k) AccumulateUnit<Dec>(u, acts[k], units, slots, &sums[k], lane_vecs);
  }
#pragma GCC unroll 16
  for (int k = 0; k < NB; ++k) out[k] = FinishRow<Dec>(sums[k]);
}

// Rows row0 + r * row_stride, r < 4, of a kRows view against one activation
// vector (a decode step): one call's setup and one reduction (FinishRows4)
// for the 4, where short rows (a MoE expert's few hundred columns) spent much
// of their time in a row's own (matvec_bench in cache, Zen 5, 512 / 1024 /
// 4096 columns: Q4_0 +50 / +28 / +9 %, Q4_K +30 / +24 / +12 %, Q8_0 +25 /
// +16 / +8 %, Q6_K +27 / +15 / +1 %). The rows run one after the other, as
// the bytes lie: taking the 4 rows' units in turn streamed 10-20 % slower
// from memory on 2 threads. Each row's sums live in registers (an array of
// them indexed by the row went through memory every unit). Each row's arithmetic is
// DotQuantized<Dec, 1>'s, so its dot is the same to the bit.
template <typename Dec>
inline void DotQuantizedRows4(const uint8_t* row0, int64_t row_stride, int64_t cols,
                              const QuantizedActs& a, float* out) {
  const int64_t units = cols / 256;
  const Slots<Dec> slots;
  __m512 v[4];
  for (int r = 0; r < 4; ++r) {
    RowSums<Dec> sums;  // In registers: one per row, not an array indexed by r.
    const uint8_t* row = row0 + r * row_stride;
    int64_t un = 0;
    if constexpr (kLoadsPairs<Dec>) {
      for (; un + 2 <= units; un += 2) {
        PrefetchAhead<2 * Dec::kUnitBytes>(row + un * Dec::kUnitBytes);
        Unit u[2];
        Dec::Load2(row + un * Dec::kUnitBytes, Dec::kUnitBytes, u);
        PairCodes<Dec>(&u[0]);
        PairCodes<Dec>(&u[1]);
        AccumulateUnit<Dec>(u[0], a, un, slots, &sums);
        AccumulateUnit<Dec>(u[1], a, un + 1, slots, &sums);
      }
    }
    for (; un < units; ++un) {
      PrefetchAhead<Dec::kUnitBytes>(row + un * Dec::kUnitBytes);
      Unit u;
      Dec::Load(row + un * Dec::kUnitBytes, &u);
      PairCodes<Dec>(&u);
      AccumulateUnit<Dec>(u, a, un, slots, &sums);
    }
    if (Unit u; const int lane_vecs = LoadTailUnit<Dec>(row, cols, units, Dec::kUnitBytes, &u))
      AccumulateUnit<Dec>(u, a, units, slots, &sums, lane_vecs);
    v[r] = RowVector(sums);
  }
  FinishRows4(v, out);
}

// The kInterleaveRows rows of a group of a kInterleaved view (`group` is its
// first row's RowStart) against one activation vector, unit by unit: the
// group's units are one contiguous stream, read and prefetched in order
// (each row alone would read a quarter of every few lines, which neither its
// prefetch nor the hardware's keeps ahead of). Each row's arithmetic is
// DotQuantized<Dec, 1>'s, so its dot is the same to the bit.
template <typename Dec>
inline void DotQuantizedGroup(const uint8_t* group, int64_t cols, const QuantizedActs& a,
                              float* out) {
  static_assert(kInterleaveRows == 4, "one RowSums per row below");
  constexpr int kStream = kInterleaveRows * Dec::kUnitBytes;
  // One variable per row, not an array: GCC kept an array of them in memory.
  RowSums<Dec> s0, s1, s2, s3;
  const Slots<Dec> slots;
  for (int64_t un = 0; un < cols / 256; ++un) {
    const uint8_t* p = group + un * kStream;
    auto step = [&](int i, RowSums<Dec>* sums) __attribute__((always_inline)) {
      // A unit's worth of prefetch per unit read, as the per-row loop does:
      // the group's 17 lines (Q8_0) asked for at once measured slower.
      PrefetchAhead<Dec::kUnitBytes>(p + i * Dec::kUnitBytes);
      Unit u;
      Dec::Load(p + i * Dec::kUnitBytes, &u);
      PairCodes<Dec>(&u);
      AccumulateUnit<Dec>(u, a, un, slots, sums);
    };
    step(0, &s0);
    step(1, &s1);
    step(2, &s2);
    step(3, &s3);
  }
  const __m512 v[4] = {RowVector(s0), RowVector(s1), RowVector(s2), RowVector(s3)};
  FinishRows4(v, out);
}

// Quantizes one activation vector for a dot with rows of `type`: qs, d, s16,
// s32 per block of 32, then qp and ds in the type's ActOrder
// (matvec_avx512_acts.cc).
void QuantizeActsAvx512(WeightType type, const float* x, int64_t cols, const QuantizedActs& out);

// Q2_K, Q3_K (matvec_avx512_lane16.cc): out[k] = the row's dot with acts[k],
// k < NB; and their activations' qp and ds in kLane16 order, from qs, d and
// s16, for `units` units of 256.
template <int NB>
void DotLane16Avx512(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
                     float* out);
void ReorderLane16(bool q3, int64_t units, const QuantizedActs& out);

// F32, F16, BF16 (matvec_avx512_float.cc): out[k] = the row's dot with the
// f32 vector x + k x_stride, k < NB.
template <int NB>
void DotFloatAvx512(WeightType type, const uint8_t* row, int64_t cols, const float* x,
                    int64_t x_stride, float* out);

// The codebook types (IsGridType), matvec_avx512_iq.cc: out[k] = the row's
// dot with acts[k], k < NB.
template <int NB>
void DotGridAvx512(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
                   float* out);

// As DotQuantizedRows4, for Q2_K/Q3_K and for the codebook types: out[r] the
// dot of row row0 + r * row_stride with a, r < 4, each to the bit what
// DotLane16Avx512<1> / DotGridAvx512<1> gives that row.
void DotLane16Rows4Avx512(WeightType type, const uint8_t* row0, int64_t row_stride, int64_t cols,
                          const QuantizedActs& a, float* out);
void DotGridRows4Avx512(WeightType type, const uint8_t* row0, int64_t row_stride, int64_t cols,
                        const QuantizedActs& a, float* out);

}  // namespace waste::kernels::internal::avx512

#endif  // WASTE_DAEMON_KERNELS_MATVEC_AVX512_INTERNAL_H_
