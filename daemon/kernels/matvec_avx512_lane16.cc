// The Q2_K and Q3_K loops of the AVX-512 family and their activation order
// (ActOrder::kLane16): the decoder, the unit loop it feeds and the reorder of
// the activation that matches it. Compiled with AVX512_COPTS.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "daemon/kernels/matvec_avx512_internal.h"
#include "daemon/kernels/matvec_internal.h"
#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels::internal::avx512 {
namespace {

// 256 elements of a row in kLane16 order, for DotLane16.
struct Lane16Unit {
  __m512i codes[4];  // u8, lane L times Lane16Factor(L).
  __m512 wsc;        // Lane L: the weight scale of its sub-block.
  // Lane L: its sub-block's coefficient of s16 (zero point, min) divided by
  // Dec::kSumScale.
  __m512 coef;
};

// The loop of the types with a scale per 16 elements and the activation in
// kLane16 order (Dec::Load fills a Lane16Unit, with Dec::Consts made once): the 4 vpdpbusd of a
// unit chain into one int32 vector of 16 sub-block sums, so each activation vector costs one cvt,
// one mul and two fmas per 256 elements beyond the products. The row's lanes go back to sub-block
// order before its sum, which is then that of the natural order to the bit.
// Unit `un` of a row, decoded in u, times activation vector a.
[[gnu::always_inline]] inline void AccumulateLane16(const Lane16Unit& u, const QuantizedActs& a,
                                                    int64_t un, __m512* acc, __m512* bias) {
  const int8_t* q = a.qp + 256 * un;
  const float* ds = a.ds + 32 * un;
  __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.codes[0], _mm512_load_si512(q));
#pragma GCC unroll 4
  for (int v = 1; v < 4; ++v)
    dot = _mm512_dpbusd_epi32(dot, u.codes[v], _mm512_load_si512(q + 64 * v));
  *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(u.wsc, _mm512_load_ps(ds)), *acc);
  *bias = _mm512_fmadd_ps(u.coef, _mm512_load_ps(ds + 16), *bias);
}

// A row's accumulators as one vector in sub-block order, whose sum is the
// row's dot.
template <typename Dec>
[[gnu::always_inline]] inline __m512 Lane16RowVector(__m512 acc, __m512 bias) {
  alignas(64) static constexpr auto kLaneOf = [] {
    std::array<int32_t, 16> t{};
    for (int l = 0; l < 16; ++l) t[Lane16SubBlock(l)] = l;
    return t;
  }();
  return _mm512_permutexvar_ps(_mm512_load_si512(kLaneOf.data()),
                               _mm512_fmadd_ps(bias, _mm512_set1_ps(Dec::kSumScale), acc));
}

template <typename Dec, int NB>
inline void DotLane16(const uint8_t* row, int64_t cols, const QuantizedActs* acts, float* out) {
  const int64_t units = cols / 256;
  __m512 acc[NB], bias[NB];
#pragma GCC unroll 16
  for (int k = 0; k < NB; ++k) acc[k] = bias[k] = _mm512_setzero_ps();
  const typename Dec::Consts consts;
  for (int64_t un = 0; un < units; ++un) {
    PrefetchAhead<Dec::kUnitBytes>(row + un * Dec::kUnitBytes);
    Lane16Unit u;
    Dec::Load(row + un * Dec::kUnitBytes, consts, &u);
#pragma GCC unroll 16
    for (int k = 0; k < NB; ++k) AccumulateLane16(u, acts[k], un, &acc[k], &bias[k]);
  }
#pragma GCC unroll 16
  for (int k = 0; k < NB; ++k) out[k] = _mm512_reduce_add_ps(Lane16RowVector<Dec>(acc[k], bias[k]));
}

// DotLane16<Dec, 1> of rows row0 + r * row_stride, r < 4, with one
// reduction for the 4 (FinishRows4; see DotQuantizedRows4).
template <typename Dec>
inline void DotLane16Rows4(const uint8_t* row0, int64_t row_stride, int64_t cols,
                           const QuantizedActs& a, float* out) {
  const int64_t units = cols / 256;
  const typename Dec::Consts consts;
  __m512 v[4];
  for (int r = 0; r < 4; ++r) {
    const uint8_t* row = row0 + r * row_stride;
    __m512 acc = _mm512_setzero_ps(), bias = _mm512_setzero_ps();
    for (int64_t un = 0; un < units; ++un) {
      PrefetchAhead<Dec::kUnitBytes>(row + un * Dec::kUnitBytes);
      Lane16Unit u;
      Dec::Load(row + un * Dec::kUnitBytes, consts, &u);
      AccumulateLane16(u, a, un, &acc, &bias);
    }
    v[r] = Lane16RowVector<Dec>(acc, bias);
  }
  FinishRows4(v, out);
}

// Q2_K, Q3_K in kLane16 order (see ActOrder): qs as one zmm has in 128-bit
// lane k the 16 bytes of 4 sub-blocks, 2-bit field p of every byte holding
// sub-block (k, p). Lane (k, p) of zmm v takes dword p ^ v of its 128-bit
// lane and keeps field p in place: an and with 3 << 2p, no shift, so the
// code counts kLane16Factor(p) times, which the activation's ds divides back
// out (exactly: powers of 2). Q2_K moves the dwords with one vpshufd per zmm
// (none for v = 0). Q3_K adds its bit 4h + p of hmask byte
// 16 (k % 2) + 4 (p ^ v) + b (hmask twice) as code bit 2 (codes 0..7 for
// q - 4: kSumScale -4 takes the -4), and its field 3 moves down to bits 4-5
// so that bit 2 fits a byte: one vpmultishiftqb per zmm picks each byte's
// field from the dword of its qword that p ^ v names (for v >= 2 from qs with
// its qwords swapped, one vpshufd for all), another its hmask bit, and a
// vpternlogd merges them. Q2_K's mins are their own coefficients (kSumScale
// -1).
template <bool kQ3>
struct Q23K {
  using Block = std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>;
  static constexpr int kUnitBytes = sizeof(Block);
  static constexpr float kSumScale = kQ3 ? -4 : -1;
  // vpshufd immediates: dword p of each 128-bit lane takes dword p ^ v.
  static constexpr int kSwap[4] = {0xE4, 0xB1, 0x4E, 0x1B};
  // Byte 4L of lane L: its sub-block, for the scale bytes' vpermb.
  alignas(64) static constexpr std::array<uint8_t, 64> kScaleIndex = [] {
    std::array<uint8_t, 64> t{};
    for (int l = 0; l < 16; ++l) t[4 * l] = static_cast<uint8_t>(Lane16SubBlock(l));
    return t;
  }();
  // Q3_K's vpmultishiftqb controls, per w = v & 1 (v >= 2 reads the qwords
  // swapped): output byte (lane L = 4k + p, byte b) starts its 8 bits at
  // byte b of dword (p % 2) ^ w of its qword, + 2 for p = 3 (field 3 down to
  // bits 4-5); and so that hmask bit 4 (k / 2) + p lands on bit 2p + 2 (6
  // for p = 3).
  struct Controls {
    std::array<std::array<uint8_t, 64>, 2> qs, hmask;
  };
  alignas(64) static constexpr Controls kControls = [] {
    Controls t{};
    for (int w = 0; w < 2; ++w) {
      for (int l = 0; l < 16; ++l) {
        const int k = l / 4, p = l % 4;
        for (int b = 0; b < 4; ++b) {
          const int start = 8 * (4 * ((p % 2) ^ w) + b);
          const int target = p == 3 ? 6 : 2 * p + 2;
          t.qs[w][4 * l + b] = static_cast<uint8_t>(start + (p == 3 ? 2 : 0));
          t.hmask[w][4 * l + b] =
              static_cast<uint8_t>((start + 4 * (k / 2) + p - target + 64) % 64);
        }
      }
    }
    return t;
  }();

  // The loop's constants, made once per row and held in registers: as
  // memory operands (GCC's choice) they cost a unit about as many loads as
  // its codes and activation do, and loads bound this loop.
  struct Consts {
    __m512i fields =
        _mm512_set4_epi32(static_cast<int>(0xC0C0C0C0), 0x30303030, 0x0C0C0C0C, 0x03030303);
    __m512i scale_index = _mm512_load_si512(kScaleIndex.data());
    // Q3_K: field 3 at bits 4-5; each lane's hmask bit.
    __m512i q3_fields = _mm512_set4_epi32(0x30303030, 0x30303030, 0x0C0C0C0C, 0x03030303);
    __m512i hbit = _mm512_set4_epi32(0x40404040, 0x40404040, 0x10101010, 0x04040404);
    __m512i qs_control[2] = {_mm512_load_si512(kControls.qs[0].data()),
                             _mm512_load_si512(kControls.qs[1].data())};
    __m512i hmask_control[2] = {_mm512_load_si512(kControls.hmask[0].data()),
                                _mm512_load_si512(kControls.hmask[1].data())};
    Consts() {
      if constexpr (kQ3) {
        Pin(q3_fields);
        Pin(hbit);
        for (__m512i& x : qs_control) Pin(x);
        for (__m512i& x : hmask_control) Pin(x);
      } else {
        Pin(fields);
      }
      Pin(scale_index);
    }
    [[gnu::always_inline]] static void Pin(__m512i& x) { asm("" : "+v"(x)); }
  };

  template <int kV>
  [[gnu::always_inline]] static __m512i Swap(__m512i x) {
    if constexpr (kV == 0) return x;
    // A constexpr variable: without optimization GCC evaluates the array
    // access at run time, and the intrinsic needs an immediate.
    constexpr int kImm = kSwap[kV];
    return _mm512_shuffle_epi32(x, static_cast<_MM_PERM_ENUM>(kImm));
  }
  // Zmm kV of codes; Q3_K: qs2 and hmask2 are qs and hmask with their
  // qwords swapped.
  template <int kV>
  [[gnu::always_inline]] static __m512i Codes(const Consts& c, __m512i qs, __m512i qs2,
                                              __m512i hmask, __m512i hmask2) {
    if constexpr (kQ3) {
      constexpr int w = kV & 1;
      const __m512i q = _mm512_and_si512(
          _mm512_multishift_epi64_epi8(c.qs_control[w], kV < 2 ? qs : qs2), c.q3_fields);
      const __m512i h = _mm512_multishift_epi64_epi8(c.hmask_control[w], kV < 2 ? hmask : hmask2);
      // hbit ? h : q.
      return _mm512_ternarylogic_epi32(h, q, c.hbit, 0xE4);
    } else {
      return _mm512_and_si512(Swap<kV>(qs), c.fields);
    }
  }

  [[gnu::always_inline]] static void Load(const uint8_t* p, const Consts& c, Lane16Unit* u) {
    const Block* b = reinterpret_cast<const Block*>(p);
    __m512i qs = _mm512_loadu_si512(b->qs);
    // In a register: as a memory operand of each vpshufd it is loaded 4 times.
    asm("" : "+v"(qs));
    __m512i qs2 = qs, hmask = qs, hmask2 = qs;
    if constexpr (kQ3) {
      hmask =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->hmask)));
      qs2 = Swap<2>(qs);
      hmask2 = Swap<2>(hmask);
    }
    u->codes[0] = Codes<0>(c, qs, qs2, hmask, hmask2);
    u->codes[1] = Codes<1>(c, qs, qs2, hmask, hmask2);
    u->codes[2] = Codes<2>(c, qs, qs2, hmask, hmask2);
    u->codes[3] = Codes<3>(c, qs, qs2, hmask, hmask2);
    if constexpr (kQ3) {
      // Zero-extended into lane order by one vpermb.
      const KScaleWords w = UnpackQ3KScales(b->scales);
      const __m512i sc =
          _mm512_sub_epi32(_mm512_maskz_permutexvar_epi8(
                               0x1111111111111111, c.scale_index,
                               _mm512_castsi128_si512(_mm_set_epi64x(static_cast<int64_t>(w.hi),
                                                                     static_cast<int64_t>(w.lo)))),
                           _mm512_set1_epi32(32));
      const __m512 d = _mm512_cvtph_ps(
          _mm256_set1_epi16(static_cast<int16_t>(LoadU16(p + offsetof(BlockQ3_K, d)))));
      u->wsc = _mm512_mul_ps(_mm512_cvtepi32_ps(sc), d);
      u->coef = u->wsc;
    } else {
      // Scale byte j: the scale in its low nibble, the min in its high one.
      const __m512i s = _mm512_maskz_permutexvar_epi8(
          0x1111111111111111, c.scale_index,
          _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales))));
      const __m512 sc = _mm512_cvtepi32_ps(_mm512_and_si512(s, _mm512_set1_epi32(0x0F)));
      const __m512 mn = _mm512_cvtepi32_ps(_mm512_srli_epi32(s, 4));
      // d and dmin converted together: lanes alternate d, dmin.
      const __m512 d_dmin =
          _mm512_cvtph_ps(_mm256_set1_epi32(static_cast<int>(LoadU32(p + offsetof(BlockQ2_K, d)))));
      u->wsc = _mm512_mul_ps(sc, _mm512_moveldup_ps(d_dmin));
      u->coef = _mm512_mul_ps(mn, _mm512_movehdup_ps(d_dmin));
    }
  }
};

}  // namespace

template <int NB>
void DotLane16Avx512(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
                     float* out) {
  if (type == WeightType::kQ3_K) return DotLane16<Q23K<true>, NB>(row, cols, acts, out);
  DotLane16<Q23K<false>, NB>(row, cols, acts, out);
}

void DotLane16Rows4Avx512(WeightType type, const uint8_t* row0, int64_t row_stride, int64_t cols,
                          const QuantizedActs& a, float* out) {
  if (type == WeightType::kQ3_K) return DotLane16Rows4<Q23K<true>>(row0, row_stride, cols, a, out);
  DotLane16Rows4<Q23K<false>>(row0, row_stride, cols, a, out);
}

template void DotLane16Avx512<1>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotLane16Avx512<2>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotLane16Avx512<3>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);
template void DotLane16Avx512<4>(WeightType, const uint8_t*, int64_t, const QuantizedActs*, float*);

// qp and ds in kLane16 order. Zmm v, lane L = 4k + p takes qs dword
// 32 (k / 2) + 8 p + 4 (k % 2) + (p ^ v): lanes 0-7 from the first 128
// elements, 8-15 from the second.
void ReorderLane16(bool q3, int64_t units, const QuantizedActs& out) {
  struct Tables {
    std::array<std::array<int32_t, 16>, 4> dword;
    std::array<int32_t, 16> group, sub_block;
    std::array<std::array<float, 16>, 2> inverse_factor;  // Q2_K, Q3_K.
  };
  alignas(64) static constexpr Tables kTables = [] {
    Tables t{};
    for (int l = 0; l < 16; ++l) {
      const int k = l / 4, p = l % 4;
      for (int v = 0; v < 4; ++v) t.dword[v][l] = 8 * p + 4 * (k % 2) + (p ^ v);
      t.group[l] = Lane16SubBlock(l) / 2;
      t.sub_block[l] = Lane16SubBlock(l);
      for (int q = 0; q < 2; ++q) t.inverse_factor[q][l] = 1 / Lane16Factor(q == 1, l);
    }
    return t;
  }();
  const Tables& t = kTables;
  for (int64_t u = 0; u < units; ++u) {
    const int8_t* in = out.qs + 256 * u;
    const __m512i s0 = _mm512_load_si512(in), s1 = _mm512_load_si512(in + 64);
    const __m512i s2 = _mm512_load_si512(in + 128), s3 = _mm512_load_si512(in + 192);
    for (int v = 0; v < 4; ++v) {
      const __m512i index = _mm512_loadu_si512(t.dword[v].data());
      _mm512_store_si512(out.qp + 256 * u + 64 * v,
                         _mm512_mask_blend_epi32(0xFF00, _mm512_permutex2var_epi32(s0, index, s1),
                                                 _mm512_permutex2var_epi32(s2, index, s3)));
    }
    const __m512 d = _mm512_permutexvar_ps(_mm512_loadu_si512(t.group.data()),
                                           _mm512_castps256_ps512(_mm256_load_ps(out.d + 8 * u)));
    _mm512_store_ps(out.ds + 32 * u,
                    _mm512_mul_ps(d, _mm512_loadu_ps(t.inverse_factor[q3].data())));
    _mm512_store_ps(out.ds + 32 * u + 16,
                    _mm512_permutexvar_ps(_mm512_loadu_si512(t.sub_block.data()),
                                          _mm512_loadu_ps(out.s16 + 16 * u)));
  }
}

}  // namespace waste::kernels::internal::avx512
