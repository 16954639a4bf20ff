// AVX2 + FMA + F16C loops (compiled with -mavx2 -mfma -mf16c; run only when
// DetectIsa() says the CPU has them). The small fixed loops are forced
// unrolled: GCC -O2 leaves them rolled, which keeps accumulators and decoded
// groups in stack memory. One 32-element group per step: codes
// as 32 u8 in a ymm, vpmaddubsw + vpmaddwd against the int8 activations
// (one vpdpbusd in the AVX-VNNI build of these loops: avx2_variant.h),
// scaled in f32 per 4-element lane.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "common/logging.h"
#include "daemon/kernels/avx2_inline.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/matvec_avx2_internal.h"
#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels::internal::WASTE_AVX2_NS {
namespace {

constexpr int kMaxNb = kRowTile;

[[gnu::always_inline]] inline __m256i LowHighNibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

// Byte j of the result is 0x10 if bit j of qh is set, else 0.
[[gnu::always_inline]] inline __m256i FifthBitBytes(const uint8_t* qh_bytes) {
  const uint32_t qh = LoadU32(qh_bytes);
  const __m256i shuf =
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), shuf);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  bytes = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x10));
}

// Q8_0's codes are signed int8; vpmaddubsw needs one u8 operand and would
// saturate on q + 128, so it takes |q| and moves q's sign onto the activation.
template <bool kSigned>
[[gnu::always_inline]] inline __m256i IntDot(__m256i codes, __m256i act) {
  if constexpr (kSigned) {
    return DotBytes(_mm256_sign_epi8(codes, codes), _mm256_sign_epi8(act, codes));
  } else {
    return DotBytes(codes, act);
  }
}

// The legacy decoders: Codes(row, gi), a group's 32 codes; Scales<kPartial>
// (row, g, n), groups g .. g + 7's weight scales and, for the unsigned ones,
// the coefficients of their activation sums (see Group in
// matvec_scalar.cc), lane j group g + j; a partial chunk (kPartial: the n < 8
// groups that end a row) reads only its n groups' and leaves the other lanes
// 0.
struct ChunkScales {
  __m256 wscale, coef;
};

// All ones in int32 lanes j < n.
[[gnu::always_inline]] inline __m256i PresentLanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Q4_0, Q4_1, Q5_0, Q5_1: d (and m) at the block's start; the zero point of
// the types without m (-8, -16) times d is their coefficient.
template <typename Block, bool kFifthBit, bool kMin>
struct Nibbles {
  static constexpr int kBlockBytes = sizeof(Block);
  static constexpr bool kSigned = false;
  [[gnu::always_inline]] static __m256i Codes(const uint8_t* row, int64_t gi) {
    const auto* b = reinterpret_cast<const Block*>(row) + gi;
    if constexpr (kFifthBit) return _mm256_or_si256(LowHighNibbles(b->qs), FifthBitBytes(b->qh));
    return LowHighNibbles(b->qs);
  }
  template <bool kPartial>
  [[gnu::always_inline]] static ChunkScales Scales(const uint8_t* row, int64_t g, int n) {
    const uint8_t* p = row + g * kBlockBytes;
    const __m256 d = GatherF16x8<kBlockBytes, kPartial>(p, n);
    if constexpr (kMin) return {d, GatherF16x8<kBlockBytes, kPartial>(p + offsetof(Block, m), n)};
    return {d, _mm256_mul_ps(d, _mm256_set1_ps(kFifthBit ? -16.0f : -8.0f))};
  }
};
using Q4_0 = Nibbles<BlockQ4_0, false, false>;
using Q4_1 = Nibbles<BlockQ4_1, false, true>;
using Q5_0 = Nibbles<BlockQ5_0, true, false>;
using Q5_1 = Nibbles<BlockQ5_1, true, true>;

// Q8_0: AVX2 multiplies |q| into the activation with q's sign (IntDot), as
// vpmaddubsw would saturate on q + 128. AVX-VNNI's vpdpbusd does not: there
// the codes are q + 128 (one xor per group, shared by a tile's vectors) and
// the 128 comes back out through the activation's block sums (coefficient
// -128 d), as in the AVX-512 loop, leaving one instruction per group and
// vector where the sign trick took two.
inline constexpr bool kQ8_0Signed = !kVnni;
[[gnu::always_inline]] inline __m256i Q8_0Codes(const void* qs) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  return kQ8_0Signed ? q : _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
}
[[gnu::always_inline]] inline ChunkScales Q8_0Scales(__m256 d) {
  return {d, kQ8_0Signed ? _mm256_setzero_ps() : _mm256_mul_ps(d, _mm256_set1_ps(-128.0f))};
}

struct Q8_0 {
  static constexpr int kBlockBytes = sizeof(BlockQ8_0);
  static constexpr bool kSigned = kQ8_0Signed;
  [[gnu::always_inline]] static __m256i Codes(const uint8_t* row, int64_t gi) {
    return Q8_0Codes(reinterpret_cast<const BlockQ8_0*>(row)[gi].qs);
  }
  template <bool kPartial>
  [[gnu::always_inline]] static ChunkScales Scales(const uint8_t* row, int64_t g, int n) {
    return Q8_0Scales(GatherF16x8<kBlockBytes, kPartial>(row + g * kBlockBytes, n));
  }
};

// Q8_0 in the kInterleaved layout (a grouped row; `row` is its first
// unit): group gi's scale and quants sit in unit gi / 8, whose 8 scales
// are one load (its rows are whole units: never partial).
struct InterleavedQ8_0 {
  static constexpr int kUnitStride = kInterleaveRows * 8 * sizeof(BlockQ8_0);
  static constexpr bool kSigned = kQ8_0Signed;
  [[gnu::always_inline]] static __m256i Codes(const uint8_t* row, int64_t gi) {
    return Q8_0Codes(row + gi / 8 * kUnitStride + kUnitScaleBytes + kQK32 * (gi % 8));
  }
  template <bool kPartial>
  [[gnu::always_inline]] static ChunkScales Scales(const uint8_t* row, int64_t g, int n) {
    static_assert(!kPartial);
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g / 8 * kUnitStride));
    return Q8_0Scales(_mm256_cvtph_ps(d));
  }
};

// IQ4_NL and MXFP4: nibbles placed as Q4_0's, each indexing the type's table
// of 16 signed values.
template <typename Block, const int8_t* kTable>
struct Table4 {
  static constexpr int kBlockBytes = sizeof(Block);
  static constexpr bool kSigned = true;
  [[gnu::always_inline]] static __m256i Codes(const uint8_t* row, int64_t gi) {
    const auto* b = reinterpret_cast<const Block*>(row) + gi;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kTable)));
    return _mm256_shuffle_epi8(table, LowHighNibbles(b->qs));
  }
  template <bool kPartial>
  [[gnu::always_inline]] static ChunkScales Scales(const uint8_t* row, int64_t g, int n) {
    const uint8_t* p = row + g * kBlockBytes;
    if constexpr (std::is_same_v<Block, BlockMXFP4>) {
      // The 8 exponents as 2^(e - 128) (E8M0HalfToF32, 8 at once). An
      // absent group's lane is 0, not the subnormal 2^-128 of e = 0 (every
      // multiply with a subnormal takes a slow assist).
      uint64_t bytes = 0;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        if (!kPartial || j < n) bytes |= uint64_t{p[kBlockBytes * j]} << (8 * j);
      }
      const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(bytes)));
      const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
      const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
      __m256i bits = _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e));
      if constexpr (kPartial) bits = _mm256_and_si256(bits, PresentLanes(n));
      return {_mm256_castsi256_ps(bits), _mm256_setzero_ps()};
    } else {
      return {GatherF16x8<kBlockBytes, kPartial>(p, n), _mm256_setzero_ps()};
    }
  }
};
using Iq4Nl = Table4<BlockIQ4_NL, kIq4NlValues>;
using Mxfp4 = Table4<BlockMXFP4, kMxfp4Values>;

// Lane j < kGroups of the result: the sum of the 8 int32 lanes of dots[j]
// (exact: the order of integer sums does not matter); the other lanes 0.
template <int kGroups>
[[gnu::always_inline]] inline __m256i GroupTotals(const __m256i dots[8]) {
  // q0: groups 0-3 of the elements' low 128 bits, then of the high 128; q1
  // groups 4-7.
  const __m256i q0 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(dots[0], dots[1]), _mm256_hadd_epi32(dots[2], dots[3]));
  if constexpr (kGroups <= 4) {
    return _mm256_zextsi128_si256(
        _mm_add_epi32(_mm256_castsi256_si128(q0), _mm256_extracti128_si256(q0, 1)));
  }
  const __m256i q1 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(dots[4], dots[5]), _mm256_hadd_epi32(dots[6], dots[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20),
                          _mm256_permute2x128_si256(q0, q1, 0x31));
}

// Groups g .. g + kGroups - 1 of a row (kGroups < 8: the groups that end it)
// against NB activation vectors: each group's integer dot reduced to lane j
// of one vector (GroupTotals), then one cvt and fma per 8 groups with the
// scales converted 8 at a time, and one fma for their zero-point terms
// against the activation's block sums, where each group had its own scalar
// f16 conversion, broadcast, cvt and fma, and a scalar fma chain for its
// zero point: in cache, Zen 5, batch 1, 4224 columns Q8_0 25 -> 34 GB/s,
// Q4_1 13 -> 17, Q5_0 and Q5_1 12 -> 14; 128-224 columns (a partial chunk
// only, its group count a template argument) within a few % either way.
template <typename Dec, int NB, int kGroups>
[[gnu::always_inline]] inline void AccumulateChunk(const uint8_t* row, int64_t g,
                                                   const QuantizedActs* acts, __m256* acc,
                                                   __m256* bias) {
  constexpr bool kPartial = kGroups < 8;
  const ChunkScales sc = Dec::template Scales<kPartial>(row, g, kGroups);
  __m256i codes[kGroups];
#pragma GCC unroll 8
  for (int j = 0; j < kGroups; ++j) codes[j] = Dec::Codes(row, g + j);
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) {
    const QuantizedActs& a = acts[k];
    __m256i dots[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      // An absent group's activation is not read (it may lie past the vector).
      dots[j] = j < kGroups
                    ? IntDot<Dec::kSigned>(
                          codes[j],
                          _mm256_load_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * (g + j))))
                    : _mm256_setzero_si256();
    }
    __m256 ad, s32;
    if constexpr (kPartial) {
      ad = _mm256_maskload_ps(a.d + g, PresentLanes(kGroups));
      s32 = _mm256_maskload_ps(a.s32 + g, PresentLanes(kGroups));
    } else {
      ad = _mm256_loadu_ps(a.d + g);
      s32 = _mm256_loadu_ps(a.s32 + g);
    }
    acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(GroupTotals<kGroups>(dots)),
                             _mm256_mul_ps(sc.wscale, ad), acc[k]);
    if constexpr (!Dec::kSigned) bias[k] = _mm256_fmadd_ps(sc.coef, s32, bias[k]);
  }
}

// AccumulateChunk<Dec, NB, n> for the n < 8 groups that end a row.
template <typename Dec, int NB, int... kN>
[[gnu::always_inline]] inline void AccumulateLastChunk(int n, const uint8_t* row, int64_t g,
                                                       const QuantizedActs* acts, __m256* acc,
                                                       __m256* bias,
                                                       std::integer_sequence<int, kN...>) {
  ((n == kN + 1 ? (AccumulateChunk<Dec, NB, kN + 1>(row, g, acts, acc, bias), 0) : 0), ...);
}

// Finishes the rows of a Sum* loop: out[k] = HorizontalSum(acc[k]) + bias[k].
template <int NB>
[[gnu::always_inline]] inline void Finish(const __m256* acc, const float* bias, float* out) {
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) out[k] = HorizontalSum(acc[k]) + bias[k];
}

// Groups [g_begin, g_end) of a row of 32-element blocks, into acc (its
// zero-point terms added in; bias 0), 8 groups at a time (AccumulateChunk),
// the last n < 8 as a partial chunk (Finish makes the dots).
template <typename Dec, int NB>
[[gnu::always_inline]] inline void SumLegacy(const uint8_t* row, int64_t g_begin, int64_t g_end,
                                             const QuantizedActs* acts, __m256* acc_out,
                                             float* bias_out) {
  // Local until the end: in the callers' arrays, the loop kept them in memory.
  __m256 acc[NB], bias[NB];
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) acc[k] = bias[k] = _mm256_setzero_ps();
  auto prefetch = [&](int64_t g) {
    if constexpr (requires { Dec::kUnitStride; }) {
      PrefetchAhead<8 * sizeof(BlockQ8_0)>(row + g / 8 * Dec::kUnitStride);
    } else {
      PrefetchAhead<8 * Dec::kBlockBytes>(row + g * Dec::kBlockBytes);
    }
  };
  int64_t g = g_begin;
  for (; g + 8 <= g_end; g += 8) {
    prefetch(g);
    AccumulateChunk<Dec, NB, 8>(row, g, acts, acc, bias);
  }
  // (A kInterleaved row is whole units.)
  if constexpr (!requires { Dec::kUnitStride; }) {
    if (g < g_end) {
      prefetch(g);
      AccumulateLastChunk<Dec, NB>(static_cast<int>(g_end - g), row, g, acts, acc, bias,
                                   std::make_integer_sequence<int, 7>());
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) {
    acc_out[k] = Dec::kSigned ? acc[k] : _mm256_add_ps(acc[k], bias[k]);
    bias_out[k] = 0;
  }
}

template <typename Dec, int NB>
void DotLegacy(const uint8_t* row, int64_t g_begin, int64_t g_end, const QuantizedActs* acts,
               float* out) {
  __m256 acc[NB];
  float bias[NB];
  SumLegacy<Dec, NB>(row, g_begin, g_end, acts, acc, bias);
  Finish<NB>(acc, bias, out);
}

// The kInterleaveRows rows of a group of a kInterleaved Q8_0 view against
// one activation vector, unit by unit, as one stream (see
// DotQuantizedGroup in matvec_avx512_internal.h); each row's arithmetic is
// DotLegacy<InterleavedQ8_0, 1>'s.
void DotQ8_0Group(const uint8_t* group, int64_t cols, const QuantizedActs& a, float* out) {
  constexpr int kUnitBytes = 8 * sizeof(BlockQ8_0);
  __m256 acc[kInterleaveRows], bias[kInterleaveRows];
#pragma GCC unroll 8
  for (int i = 0; i < kInterleaveRows; ++i) acc[i] = bias[i] = _mm256_setzero_ps();
  for (int64_t g = 0; g < cols / 32; g += 8) {
#pragma GCC unroll 8
    for (int i = 0; i < kInterleaveRows; ++i) {
      // A unit's worth of prefetch per row and unit (spread, as in DotQuantizedGroup).
      PrefetchAhead<kUnitBytes>(group + g / 8 * InterleavedQ8_0::kUnitStride + i * kUnitBytes);
      AccumulateChunk<InterleavedQ8_0, 1, 8>(group + i * kUnitBytes, g, &a, &acc[i], &bias[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kInterleaveRows; ++i) {
    out[i] = HorizontalSum(kQ8_0Signed ? acc[i] : _mm256_add_ps(acc[i], bias[i])) + 0.0f;
  }
}

// 8 weights of a float type as f32.
template <WeightType T>
[[gnu::always_inline]] inline __m256 Load8(const uint8_t* p) {
  if constexpr (T == WeightType::kF32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  if constexpr (T == WeightType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  if constexpr (T == WeightType::kBF16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <WeightType T, int NB>
void DotFloat(const uint8_t* row, int64_t cols, const float* x, int64_t x_stride, float* out) {
  constexpr int kElem = T == WeightType::kF32 ? 4 : 2;
  __m256 acc[NB][2];
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) acc[k][0] = acc[k][1] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= cols; i += 16) {
    const __m256 w0 = Load8<T>(row + i * kElem), w1 = Load8<T>(row + (i + 8) * kElem);
#pragma GCC unroll 8
    for (int k = 0; k < NB; ++k) {
      acc[k][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + k * x_stride + i), acc[k][0]);
      acc[k][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + k * x_stride + i + 8), acc[k][1]);
    }
  }
  float tail[kMaxNb] = {};
  if (i < cols) {
    float w[16];
    DequantizeRow(T, row + i * kElem, w, cols - i);
#pragma GCC unroll 8
    for (int k = 0; k < NB; ++k) {
      for (int64_t j = i; j < cols; ++j) tail[k] += w[j - i] * x[k * x_stride + j];
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k)
    out[k] = HorizontalSum(_mm256_add_ps(acc[k][0], acc[k][1])) + tail[k];
}

// SumLegacy<Dec, NB> of a whole row of `groups` groups, as WithSumLoop's
// loop: a functor, whose call GCC inlines into the 4-row decode loop as it
// did not a lambda's once SumLegacy grew its chunk variants (rows of 128
// columns then paid a call, and a vzeroupper, per row).
template <typename Dec, int NB>
struct LegacyLoop {
  int64_t groups;
  [[gnu::always_inline]] void operator()(const uint8_t* row, const QuantizedActs* a, __m256* acc,
                                         float* bias) const {
    SumLegacy<Dec, NB>(row, 0, groups, a, acc, bias);
  }
};

// Calls sum(std::integral_constant<int, NB>, row, acc, bias) with the Sum*
// loop of a row of t's type against NB activation vectors; false for the
// types without one (the float types, DotLowBit's, the tiled ones).
template <int NB, typename SumFn>
[[gnu::always_inline]] inline bool WithSumLoop(const RowsTask& t, SumFn sum) {
  const int64_t g = t.w.cols / 32;
  auto run = [&](auto loop) __attribute__((always_inline)) {
    sum(loop);
    return true;
  };
  switch (t.w.type) {
    case WeightType::kQ4_1:
      return run(LegacyLoop<Q4_1, NB>{g});
    case WeightType::kQ5_0:
      return run(LegacyLoop<Q5_0, NB>{g});
    case WeightType::kQ5_1:
      return run(LegacyLoop<Q5_1, NB>{g});
    case WeightType::kQ8_0:
      return run(LegacyLoop<Q8_0, NB>{g});
    default:
      return false;
  }
}

// A decode step's rows [begin, end) of a kRows view, 4 at a time with one
// HorizontalSums4 for the 4, where short rows (a MoE expert's few hundred
// columns) spent much of their time in a row's own; each row to the bit
// what DotRow<1> gives it. False for the types WithSumLoop lacks.
bool DecodeRowQuads(const RowsTask& t, int64_t begin, int64_t end) {
  return WithSumLoop<1>(t, [&](auto loop) {
    int64_t r = begin;
    for (; r + 4 <= end; r += 4) {
      __m256 acc[4];
      float bias[4];
      for (int i = 0; i < 4; ++i) loop(RowStart(t.w, r + i), t.acts, &acc[i], &bias[i]);
      _mm_storeu_ps(t.y + r, _mm_add_ps(HorizontalSums4(acc), _mm_loadu_ps(bias)));
    }
    for (; r < end; ++r) {
      __m256 acc;
      float bias;
      loop(RowStart(t.w, r), t.acts, &acc, &bias);
      Finish<1>(&acc, &bias, t.y + r);
    }
  });
}

template <int NB>
void DotRow(const RowsTask& t, const uint8_t* row, int64_t b0, float* out) {
  const QuantizedActs* a = t.acts + b0;
  const float* x = t.x + b0 * t.x_stride;
  const bool summed = WithSumLoop<NB>(
      t, [&](auto loop) __attribute__((always_inline)) {
        __m256 acc[NB];
        float bias[NB];
        loop(row, a, acc, bias);
        Finish<NB>(acc, bias, out);
      });
  if (summed) return;
  switch (t.w.type) {
    case WeightType::kF32:
      return DotFloat<WeightType::kF32, NB>(row, t.w.cols, x, t.x_stride, out);
    case WeightType::kF16:
      return DotFloat<WeightType::kF16, NB>(row, t.w.cols, x, t.x_stride, out);
    case WeightType::kBF16:
      return DotFloat<WeightType::kBF16, NB>(row, t.w.cols, x, t.x_stride, out);
    case WeightType::kQ4_1:
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kQ8_0:
      return;  // WithSumLoop's.
    case WeightType::kQ4_0:
    case WeightType::kQ4_K:
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS:
    case WeightType::kMXFP4:
      // Register-tiled in matmul_avx2.cc, which matvec.cc always picks.
      WCHECK(false) << GetWeightTypeInfo(t.w.type).name << " has only the tiled AVX2 kernel";
      return;
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
    case WeightType::kIQ2_XXS:
    case WeightType::kIQ2_XS:
    case WeightType::kIQ2_S:
    case WeightType::kIQ3_XXS:
    case WeightType::kIQ3_S:
    case WeightType::kIQ1_S:
    case WeightType::kIQ1_M:
      return DotLowBit<NB>(t.w.type, row, t.w.cols, a, out);
  }
}

void RowsAvx2(const RowsTask& t, int64_t begin, int64_t end) {
  // Q4_0, the other type with a kInterleaved layout, runs in matmul_avx2.cc.
  SplitGroupedRows(
      t.w, begin, end,
      [&](int64_t b, int64_t e) {
        WCHECK(t.w.type == WeightType::kQ8_0) << "no interleaved AVX2 loop here";
        auto rows = [&](int64_t rb, int64_t re) {
          RunRowTiles(t, rb, re, [&](auto nb, const uint8_t* row, int64_t b0, float* out) {
            DotLegacy<InterleavedQ8_0, decltype(nb)::value>(row, 0, t.w.cols / 32, t.acts + b0,
                                                            out);
          });
        };
        if (t.batch > kGroupMaxBatch) return rows(b, e);
        RunGroups(
            t, b, e,
            [&](const uint8_t* group, const QuantizedActs& a, float* out) {
              DotQ8_0Group(group, t.w.cols, a, out);
            },
            rows);
      },
      [&](int64_t b, int64_t e) {
        if (t.batch == 1 && DecodeRowQuads(t, b, e)) return;
        RunRowTiles(t, b, e, [&](auto nb, const uint8_t* row, int64_t b0, float* out) {
          DotRow<decltype(nb)::value>(t, row, b0, out);
        });
      });
}

void QuantizeActsAvx2(WeightType, const float* x, int64_t cols, const QuantizedActs& out) {
  QuantizeBlocks(x, cols, out, nullptr);
}

}  // namespace

void QuantizeBlocks(const float* x, int64_t cols, const QuantizedActs& out, int32_t* block_sums) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / 32; ++b) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 32 * b + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[i]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float max_abs = _mm_cvtss_f32(m);
    const float d = max_abs / 127;
    const __m256 id = _mm256_set1_ps(max_abs != 0 ? 127 / max_abs : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      q[i] =
          _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT));
    }
    // Sums of each 16 before packing (packs reorders lanes).
    const __m256i s0 = _mm256_add_epi32(q[0], q[1]), s1 = _mm256_add_epi32(q[2], q[3]);
    const __m256 sums = _mm256_cvtepi32_ps(_mm256_hadd_epi32(s0, s1));
    // hadd lanes: [s0 pairs lo, s1 pairs lo, s0 pairs hi, s1 pairs hi].
    alignas(32) float part[8];
    _mm256_store_ps(part, sums);
    const float sum0 = part[0] + part[1] + part[4] + part[5];
    const float sum1 = part[2] + part[3] + part[6] + part[7];
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
    __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out.qs + 32 * b), p8);
    out.d[b] = d;
    out.s16[2 * b] = d * sum0;
    out.s16[2 * b + 1] = d * sum1;
    out.s32[b] = d * (sum0 + sum1);
    // Sums of at most 32 values of |q| <= 127: exact in f32.
    if (block_sums != nullptr) block_sums[b] = static_cast<int32_t>(sum0 + sum1);
  }
}

const IsaKernels& Kernels() {
  static constexpr IsaKernels kKernels = {&QuantizeActsAvx2, &RowsAvx2};
  return kKernels;
}

}  // namespace waste::kernels::internal::WASTE_AVX2_NS
