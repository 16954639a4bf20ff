// The register-tiled AVX2 loop of the table types, IQ4_NL, IQ4_XS and
// MXFP4 (see matmul_avx2.cc for the lane layout they share with Q4_0).
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
#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels::internal::WASTE_AVX2_NS::tiled {
namespace {

// IQ4_NL, IQ4_XS and MXFP4: a 4-bit code per element looked up in a 16-entry table,
// Q4_0's nibble placement per group of 32 (IQ4_XS: the super-block's 8 groups of 16 qs bytes, each
// with its 6-bit scale; it was in matvec_avx2_lowbit.cc's loop, 65% -> 69% of Q4_K here at batch
// 1, 64% -> 70% at batch 8). The qs dwords of the unit's 8 groups are transposed once
// (lane j: group j, the natural map); code vector i is then one and (or shift and and) and one
// vpshufb. MXFP4 (kSigned false) looks up its values + 12 as u8: 4 products sum in int16 (|4 x 2 x
// 24 x 127| < 2^15) and the 12 comes back out through the activation's block sums (zs). IQ4's
// values reach -127, so they take Q8_0's signed form (|v| and the sign moved onto the activation),
// a vpmaddwd per code vector. Prepare reads the 8 blocks at constant offsets from the unit: an
// array of their 8 qs pointers, which it once filled, GCC built in a loop through memory each unit
// (AVX2 in cache, Zen 5, batch 1, as % of Q4_K's GB/s: IQ4_NL 66% -> 74%, MXFP4 66% -> 91%).
// With AVX-VNNI no int16 sum limits the codes, so IQ4 takes the unsigned form
// too, its values + 128 (TableCodeOffset): the same integer dots, one
// vpdpbusd per code vector and activation.
template <WeightType T>
struct TableNibbles {
  static constexpr bool kSigned = T != WeightType::kMXFP4 && !kVnni;
  static constexpr int kZeroPoint = kSigned ? 0 : -TableCodeOffset(T);
  static constexpr int kUnitBytes =
      T == WeightType::kIQ4_XS
          ? sizeof(BlockIQ4_XS)
          : 8 * (T == WeightType::kMXFP4 ? sizeof(BlockMXFP4) : sizeof(BlockIQ4_NL));
  struct Prep {
    __m256i e[4];  // e[i] lane j: qs dword i of group j.
    __m256i table;
    __m256 wsc;
  };

  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    return PrepareBlocks<false>(p, 8);
  }
  // IQ4_NL, MXFP4: a row's groups past its last whole unit, as a unit whose
  // absent blocks are zeros (the activation's are too: see
  // QuantizeActsTiled).
  [[gnu::always_inline]] static Prep PrepareTail(const uint8_t* p,
                                                 int blocks) requires(T != WeightType::kIQ4_XS) {
    return PrepareBlocks<true>(p, blocks);
  }

  template <bool kPartial>
  [[gnu::always_inline]] static Prep PrepareBlocks(const uint8_t* p, int blocks) {
    Prep r;
    // Group j's 16 qs bytes at p + kQsOffset + kGroupStride j: constant
    // offsets (an array of the 8 pointers was built in a loop through memory,
    // ~40 instructions a unit).
    constexpr int kGroupStride = T == WeightType::kIQ4_XS ? 16 : kUnitBytes / 8;
    constexpr int kQsOffset = T == WeightType::kMXFP4    ? offsetof(BlockMXFP4, qs)
                              : T == WeightType::kIQ4_XS ? offsetof(BlockIQ4_XS, qs)
                                                         : offsetof(BlockIQ4_NL, qs);
    if constexpr (T == WeightType::kIQ4_XS) {
      r.wsc = Iq4XsScales(p);
    } else if constexpr (T == WeightType::kMXFP4) {
      uint64_t bytes = 0;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        if (!kPartial || j < blocks) bytes |= uint64_t{p[sizeof(BlockMXFP4) * j]} << (8 * j);
      }
      __m256i bits = Mxfp4ScaleBits(bytes);
      if constexpr (kPartial) {
        // An absent block's lane 0, not the subnormal 2^-128 of e = 0, which
        // every multiply would take a slow assist for.
        bits =
            _mm256_and_si256(bits, _mm256_cmpgt_epi32(_mm256_set1_epi32(blocks),
                                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
      }
      r.wsc = _mm256_castsi256_ps(bits);
    } else if constexpr (kPartial) {
      r.wsc = GatherF16x8<sizeof(BlockIQ4_NL), true>(p, blocks);
    } else {
      r.wsc = GatherHalves<sizeof(BlockIQ4_NL)>(p);
    }
    auto qs = [&](int k) {
      if (kPartial && k >= blocks) return _mm_setzero_si128();
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kQsOffset + kGroupStride * k));
    };
    __m256i g[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      g[k] = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(k)), qs(k + 4), 1);
    Transpose4(g, r.e);
    r.table = Table();
    return r;
  }

  // MXFP4: 8 E8M0 exponents (byte j of `bytes`) as the float bits of
  // 2^(e - 128) (E8M0HalfToF32, 8 at once).
  [[gnu::always_inline]] static __m256i Mxfp4ScaleBits(uint64_t bytes) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(bytes)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e));
  }

  // IQ4_XS: group j's scale, nibble j of the scales_l word and bits 2j, 2j +
  // 1 of scales_h, less 32, times d.
  [[gnu::always_inline]] static __m256 Iq4XsScales(const uint8_t* p) {
    const BlockIQ4_XS* b = reinterpret_cast<const BlockIQ4_XS*>(p);
    const __m256i low = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(LoadU32(b->scales_l))),
                          _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(0xF));
    const __m256i high =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h),
                                           _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                         _mm256_set1_epi32(3));
    const __m256i ls =
        _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(ls), _mm256_set1_ps(F16ToF32(b->d)));
  }

  // The 16 levels in both 128-bit lanes (+ TableCodeOffset in the unsigned form).
  [[gnu::always_inline]] static __m256i Table() {
    const int8_t* values = T == WeightType::kMXFP4 ? kMxfp4Values : kIq4NlValues;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
    if constexpr (kSigned) return table;
    return _mm256_add_epi8(table, _mm256_set1_epi8(static_cast<char>(TableCodeOffset(T))));
  }

  template <int I>
  [[gnu::always_inline]] static __m256i Code(const Prep& r) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i nib = I < 4 ? _mm256_and_si256(r.e[I % 4], m4)
                              : _mm256_and_si256(_mm256_srli_epi16(r.e[I % 4], 4), m4);
    return _mm256_shuffle_epi8(r.table, nib);
  }
};

// IQ4_NL, IQ4_XS and MXFP4 in kInterleavedLanes: the code dwords already
// where Transpose4 puts them (LaneCodeByte: 4 loads instead of 8, 4 inserts
// and 8 unpacks), IQ4_NL's 8 scales and MXFP4's 8 exponents one load (not 8
// and 7 blends); the same codes and scales as TableNibbles', so the same
// sums.
template <WeightType T>
struct LanesTableNibbles : TableNibbles<T> {
  using Base = TableNibbles<T>;
  using typename Base::Prep;
  static constexpr int kUnitStride = kInterleaveRows * Base::kUnitBytes;
  [[gnu::always_inline]] static Prep Prepare(const uint8_t* p) {
    constexpr int kHeader = LaneHeaderBytes(T);
    Prep r;
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      r.e[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kHeader + 32 * k));
    if constexpr (T == WeightType::kIQ4_XS) {
      r.wsc = Base::Iq4XsScales(p);
    } else if constexpr (T == WeightType::kMXFP4) {
      r.wsc = _mm256_castsi256_ps(Base::Mxfp4ScaleBits(LoadU64(p)));
    } else {
      r.wsc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    r.table = Base::Table();
    return r;
  }
};

}  // namespace

// Unit `un` of a row, prepared in prep, times NB activation vectors into
// acc: the step of TableNibbles' loop, as DotTile16's with one scale per
// lane.
template <typename Dec, int NB>
[[gnu::always_inline]] inline void AccumulateTableUnit(const typename Dec::Prep& prep,
                                                       const QuantizedActs* acts, int64_t un,
                                                       __m256* acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i half[NB], dot[NB];
  Unroll<8>([&](auto ii) __attribute__((always_inline)) {
    constexpr int i = decltype(ii)::value;
    const __m256i code = Dec::template Code<i>(prep);
    [[maybe_unused]] __m256i magnitude;
    if constexpr (Dec::kSigned) magnitude = _mm256_abs_epi8(code);
#pragma GCC unroll 8
    for (int k = 0; k < NB; ++k) {
      const __m256i a =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(acts[k].qp + 256 * un + 32 * i));
      if constexpr (Dec::kSigned) {
        const __m256i signed_a = _mm256_sign_epi8(a, code);
        dot[k] = i == 0 ? DotBytes(magnitude, signed_a) : AddDotBytes(dot[k], magnitude, signed_a);
      } else if constexpr (kVnni) {
        dot[k] = i == 0 ? DotBytes(code, a) : AddDotBytes(dot[k], code, a);
      } else {
        const __m256i p = _mm256_maddubs_epi16(code, a);
        half[k] = i % 4 == 0 ? p : _mm256_add_epi16(half[k], p);
        if constexpr (i % 4 == 3) {
          const __m256i m = _mm256_madd_epi16(half[k], ones);
          dot[k] = i == 3 ? m : _mm256_add_epi32(dot[k], m);
        }
      }
    }
  });
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) {
    const QuantizedActs& a = acts[k];
    if constexpr (Dec::kZeroPoint != 0) {
      dot[k] = _mm256_add_epi32(dot[k],
                                _mm256_load_si256(reinterpret_cast<const __m256i*>(a.zs + 8 * un)));
    }
    acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[k]),
                             _mm256_mul_ps(prep.wsc, _mm256_load_ps(a.ds + 8 * un)), acc[k]);
  }
}

// The loop of TableNibbles.
template <typename Dec, int NB>
[[gnu::always_inline]] inline void SumTileTable(const uint8_t* row, int64_t cols,
                                                const QuantizedActs* acts, __m256* acc_out) {
  const int64_t units = cols / 256;
  __m256 acc[NB];  // Local until the end (a caller's array went through memory).
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t un = 0; un < units; ++un)
    AccumulateTableUnit<Dec, NB>(Dec::Prepare(row + un * kUnitStep<Dec>), acts, un, acc);
  if constexpr (kPreparesTail<Dec>) {
    const uint8_t* p = row + units * kUnitStep<Dec>;
    if (const int blocks = TailBlocks<Dec>(p, cols); blocks != 0)
      AccumulateTableUnit<Dec, NB>(Dec::PrepareTail(p, blocks), acts, units, acc);
  }
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) acc_out[k] = acc[k];
}

template <typename Dec, int NB>
inline void DotTileTable(const uint8_t* row, int64_t cols, const QuantizedActs* acts, float* out) {
  __m256 acc[NB];
  SumTileTable<Dec, NB>(row, cols, acts, acc);
#pragma GCC unroll 8
  for (int k = 0; k < NB; ++k) out[k] = HorizontalSum(acc[k]);
}

// The kInterleaveRows rows of a group of a kInterleavedLanes view against
// one activation vector, unit by unit, as one stream, prefetched (see
// DotTileGroup): each row alone reads a quarter of every few lines, which
// the hardware's prefetch does not keep ahead of (from DRAM, 2 threads, Zen
// 5, AVX-VNNI: IQ4_XS 17 GB/s row by row, 53 a group at a time, 54 in the
// kRows layout). Each row's arithmetic is DotTileTable<Dec, 1>'s.
template <typename Dec>
inline void DotTableGroup(const uint8_t* group, int64_t cols, const QuantizedActs& a, float* out) {
  __m256 acc[kInterleaveRows];
#pragma GCC unroll 8
  for (int i = 0; i < kInterleaveRows; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t un = 0; un < cols / 256; ++un) {
    const uint8_t* p = group + un * Dec::kUnitStride;
#pragma GCC unroll 8
    for (int i = 0; i < kInterleaveRows; ++i) {
      PrefetchAhead<Dec::kUnitBytes>(p + i * Dec::kUnitBytes);
      AccumulateTableUnit<Dec, 1>(Dec::Prepare(p + i * Dec::kUnitBytes), &a, un, &acc[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kInterleaveRows; ++i) out[i] = HorizontalSum(acc[i]);
}

void RowsTable(const RowsTask& t, int64_t begin, int64_t end) {
  switch (t.w.type) {
    case WeightType::kIQ4_NL:
      return GroupedOrRows<LanesTableNibbles<WeightType::kIQ4_NL>,
                           TableNibbles<WeightType::kIQ4_NL>>(t, begin, end);
    case WeightType::kIQ4_XS:
      return GroupedOrRows<LanesTableNibbles<WeightType::kIQ4_XS>,
                           TableNibbles<WeightType::kIQ4_XS>>(t, begin, end);
    case WeightType::kMXFP4:
      return GroupedOrRows<LanesTableNibbles<WeightType::kMXFP4>, TableNibbles<WeightType::kMXFP4>>(
          t, begin, end);
    default:
      WCHECK(false) << "no AVX2 table kernel for type " << static_cast<uint32_t>(t.w.type);
  }
}

}  // namespace waste::kernels::internal::WASTE_AVX2_NS::tiled
