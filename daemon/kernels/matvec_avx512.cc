// AVX-512 (F/BW/VL/VNNI/VBMI) loops, compiled with those flags and run only
// when DetectIsa() finds them. The quantized types work in units of 256
// elements (one K-quant super-block, eight legacy blocks): four zmm of u8
// codes, each dotted with 64 int8 activations by one vpdpbusd, scaled in f32
// per int32 lane (4 elements) by weight scale x activation scale, with the
// weight's zero point / min folded into one fma per unit against the
// activation's 16-element sums (see Group in matvec_scalar.cc).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels::internal {
namespace {

constexpr int kMaxNb = 4;  // Activation vectors per pass over a row.

// 256 elements of a row, decoded for the integer dot.
struct Unit {
  __m512i codes[4];  // u8, element order.
  __m512 wscale;     // Weight scale of each 16 elements.
  __m512 coef;       // Coefficient of the activation's sum of each 16 elements.
};

// Repeats each of 8 floats twice: per 32-element group -> per 16 elements.
inline __m512 Dup8To16(__m256 v) {
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                               _mm512_castps256_ps512(v));
}

inline __m256 HalvesToF32(const Half* h, int stride_halfs) {
  const __m128i v = _mm_setr_epi16(h[0], h[stride_halfs], h[2 * stride_halfs], h[3 * stride_halfs],
                                   h[4 * stride_halfs], h[5 * stride_halfs], h[6 * stride_halfs],
                                   h[7 * stride_halfs]);
  return _mm256_cvtph_ps(v);
}

inline __m512i Combine(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

inline __m256i LowHighNibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

inline __m256i FifthBitBytes(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  return _mm256_maskz_mov_epi8(qh, _mm256_set1_epi8(0x10));
}

// Q4_0, eight 18-byte blocks: four 64-byte loads inside the 144 bytes, vpermb
// to lay each pair's nibbles out as [lo a, hi a, lo b, hi b], one shift and
// mask; the eight f16 scales come out of two of the loads with one vpermt2w.
struct Q4_0 {
  static void Load(const uint8_t* p, Unit* u) {
    const __m512i l0 = _mm512_loadu_si512(p);
    const __m512i l1 = _mm512_loadu_si512(p + 36);
    const __m512i l2 = _mm512_loadu_si512(p + 72);
    const __m512i l3 = _mm512_loadu_si512(p + 80);
    // Words of bytes 16..31 and 48..63 (the high-nibble copies) shift by 4.
    const __m512i shift = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0,
                                            0x0004000400040004, 0x0004000400040004);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    alignas(64) static constexpr auto kPerm = [] {
      struct {
        uint8_t at0[64], at28[64];
      } t{};
      for (int i = 0; i < 64; ++i) {
        const int block = i / 32, j = i % 16;
        t.at0[i] = static_cast<uint8_t>(18 * block + 2 + j);
        t.at28[i] = static_cast<uint8_t>(28 + 18 * block + 2 + j);
      }
      return t;
    }();
    const __m512i perm0 = _mm512_load_si512(kPerm.at0);
    const __m512i perm28 = _mm512_load_si512(kPerm.at28);
    u->codes[0] =
        _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi8(perm0, l0), shift), m4);
    u->codes[1] =
        _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi8(perm0, l1), shift), m4);
    u->codes[2] =
        _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi8(perm0, l2), shift), m4);
    u->codes[3] =
        _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi8(perm28, l3), shift), m4);
    // Word offsets of the scales: blocks 0-3 in l0 (0, 18, 36, 54 bytes),
    // blocks 4-7 in l2 (second source, indices + 32).
    const __m512i didx = _mm512_zextsi128_si512(_mm_setr_epi16(0, 9, 18, 27, 32, 41, 50, 59));
    const __m256 d =
        _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(l0, didx, l2)));
    u->wscale = Dup8To16(d);
    u->coef = _mm512_mul_ps(u->wscale, _mm512_set1_ps(-8));
  }
};

// Q4_1, Q5_0, Q5_1: one block at a time into a ymm, two per zmm.
template <typename Block, bool kFifthBit, bool kMin>
struct LegacyGeneric {
  static void Load(const uint8_t* p, Unit* u) {
    const Block* b = reinterpret_cast<const Block*>(p);
    for (int z = 0; z < 4; ++z) {
      __m256i lo = LowHighNibbles(b[2 * z].qs), hi = LowHighNibbles(b[2 * z + 1].qs);
      if constexpr (kFifthBit) {
        lo = _mm256_or_si256(lo, FifthBitBytes(b[2 * z].qh));
        hi = _mm256_or_si256(hi, FifthBitBytes(b[2 * z + 1].qh));
      }
      u->codes[z] = Combine(lo, hi);
    }
    constexpr int kStride = sizeof(Block) / 2;
    u->wscale = Dup8To16(HalvesToF32(&b->d, kStride));
    if constexpr (kMin) {
      u->coef = Dup8To16(HalvesToF32(&b->m, kStride));
    } else {
      u->coef = _mm512_mul_ps(u->wscale, _mm512_set1_ps(-16));
    }
  }
};
using Q4_1 = LegacyGeneric<BlockQ4_1, false, true>;
using Q5_0 = LegacyGeneric<BlockQ5_0, true, false>;
using Q5_1 = LegacyGeneric<BlockQ5_1, true, true>;

// Q8_0: codes are q ^ 0x80 = q + 128 as u8; the 128 comes back out through
// coef = -128 d (vpdpbusd does not saturate, unlike vpmaddubsw).
struct Q8_0 {
  static void Load(const uint8_t* p, Unit* u) {
    const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(p);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int z = 0; z < 4; ++z) {
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[2 * z].qs));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[2 * z + 1].qs));
      u->codes[z] = _mm512_xor_si512(Combine(lo, hi), flip);
    }
    u->wscale = Dup8To16(HalvesToF32(&b->d, sizeof(BlockQ8_0) / 2));
    u->coef = _mm512_mul_ps(u->wscale, _mm512_set1_ps(-128));
  }
};

// The 6-bit scales and mins of Q4_K/Q5_K as f32 per 16 elements.
inline void KScales(const BlockQ4_K* b, Unit* u) {
  uint32_t w[3];
  std::memcpy(w, b->scales, 12);
  const uint32_t sc_lo = w[0] & 0x3F3F3F3F, m_lo = w[1] & 0x3F3F3F3F;
  const uint32_t sc_hi = (w[2] & 0x0F0F0F0F) | (((w[0] >> 6) & 0x03030303) << 4);
  const uint32_t m_hi = ((w[2] >> 4) & 0x0F0F0F0F) | (((w[1] >> 6) & 0x03030303) << 4);
  const __m128i sc = _mm_setr_epi32(sc_lo, sc_hi, 0, 0), m = _mm_setr_epi32(m_lo, m_hi, 0, 0);
  const __m256 scf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc));
  const __m256 mf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m));
  u->wscale = Dup8To16(_mm256_mul_ps(scf, _mm256_set1_ps(F16ToF32(b->d))));
  u->coef = Dup8To16(_mm256_mul_ps(mf, _mm256_set1_ps(-F16ToF32(b->dmin))));
}

template <bool kQ5>
struct Q45K {
  using Block = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  static void Load(const uint8_t* p, Unit* u) {
    const Block* b = reinterpret_cast<const Block*>(p);
    KScales(reinterpret_cast<const BlockQ4_K*>(b), u);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i hbits;
    if constexpr (kQ5)
      hbits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh)));
    for (int z = 0; z < 4; ++z) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * z));
      __m512i codes = _mm512_and_si512(Combine(q, _mm256_srli_epi16(q, 4)), m4);
      if constexpr (kQ5) {
        // Groups 2z (low half) and 2z+1 (high half) take bits 2z and 2z+1.
        const __m512i cnt = Combine(_mm256_set1_epi16(2 * z), _mm256_set1_epi16(2 * z + 1));
        const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(hbits, cnt), _mm512_set1_epi8(1));
        codes = _mm512_or_si512(codes, _mm512_slli_epi16(bit, 4));
      }
      u->codes[z] = codes;
    }
  }
};

struct Q6K {
  static void Load(const uint8_t* p, Unit* u) {
    const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(p);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = _mm512_loadu_si512(b->ql + 64 * half);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * half)));
      for (int hi_nibble = 0; hi_nibble < 2; ++hi_nibble) {
        // Rows r = 2*hi_nibble (first 32 bytes of ql) and r + 1 (last 32).
        const int r = 2 * hi_nibble;
        const __m512i low = _mm512_and_si512(hi_nibble ? _mm512_srli_epi16(ql, 4) : ql, m4);
        const __m512i cnt = Combine(_mm256_set1_epi16(2 * r), _mm256_set1_epi16(2 * r + 2));
        const __m512i high = _mm512_and_si512(_mm512_srlv_epi16(qh, cnt), m2);
        u->codes[2 * half + hi_nibble] = _mm512_or_si512(low, _mm512_slli_epi16(high, 4));
      }
    }
    const __m512 sc = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales))));
    u->wscale = _mm512_mul_ps(sc, _mm512_set1_ps(F16ToF32(b->d)));
    u->coef = _mm512_mul_ps(u->wscale, _mm512_set1_ps(-32));
  }
};

template <typename Dec, int NB>
void DotQuantized(WeightType type, const uint8_t* row, int64_t cols, const QuantizedActs* acts,
                  float* out) {
  const int64_t unit_bytes = RowBytes(type, 256);
  const int64_t units = cols / 256;
  // One accumulator per zmm of the unit: a single one would chain 4 fmas per
  // unit through its latency.
  __m512 acc[NB][4], bias[NB];
  for (int k = 0; k < NB; ++k) {
    bias[k] = _mm512_setzero_ps();
    for (int z = 0; z < 4; ++z) acc[k][z] = _mm512_setzero_ps();
  }
  const __m512i lane_sub[4] = {
      _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
      _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7),
      _mm512_setr_epi32(8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11),
      _mm512_setr_epi32(12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15)};
  for (int64_t un = 0; un < units; ++un) {
    Unit u;
    Dec::Load(row + un * unit_bytes, &u);
    for (int k = 0; k < NB; ++k) {
      const QuantizedActs& a = acts[k];
      const __m512 scale = _mm512_mul_ps(u.wscale, Dup8To16(_mm256_load_ps(a.d + 8 * un)));
      bias[k] = _mm512_fmadd_ps(u.coef, _mm512_loadu_ps(a.s16 + 16 * un), bias[k]);
      for (int z = 0; z < 4; ++z) {
        const __m512i av = _mm512_load_si512(a.qs + 256 * un + 64 * z);
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.codes[z], av);
        acc[k][z] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                    _mm512_permutexvar_ps(lane_sub[z], scale), acc[k][z]);
      }
    }
  }
  for (int k = 0; k < NB; ++k) {
    const __m512 sum =
        _mm512_add_ps(_mm512_add_ps(acc[k][0], acc[k][1]), _mm512_add_ps(acc[k][2], acc[k][3]));
    out[k] = _mm512_reduce_add_ps(_mm512_add_ps(sum, bias[k]));
    if (cols % 256 != 0) out[k] += DotGroupsRef(type, row, 8 * units, cols / 32, acts[k]);
  }
}

template <WeightType T>
inline __m512 Load16(const uint8_t* p) {
  if constexpr (T == WeightType::kF32) return _mm512_loadu_ps(p);
  if constexpr (T == WeightType::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  if constexpr (T == WeightType::kBF16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <WeightType T, int NB>
void DotFloat(const uint8_t* row, int64_t cols, const float* x, int64_t x_stride, float* out) {
  constexpr int kElem = T == WeightType::kF32 ? 4 : 2;
  __m512 acc[NB][2];
  for (int k = 0; k < NB; ++k) acc[k][0] = acc[k][1] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    const __m512 w0 = Load16<T>(row + i * kElem), w1 = Load16<T>(row + (i + 16) * kElem);
    for (int k = 0; k < NB; ++k) {
      acc[k][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + k * x_stride + i), acc[k][0]);
      acc[k][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + k * x_stride + i + 16), acc[k][1]);
    }
  }
  float tail[kMaxNb] = {};
  if (i < cols) {
    float w[32];
    DequantizeRow(T, row + i * kElem, w, cols - i);
    for (int k = 0; k < NB; ++k) {
      for (int64_t j = i; j < cols; ++j) tail[k] += w[j - i] * x[k * x_stride + j];
    }
  }
  for (int k = 0; k < NB; ++k)
    out[k] = _mm512_reduce_add_ps(_mm512_add_ps(acc[k][0], acc[k][1])) + tail[k];
}

template <int NB>
void DotRow(const RowsTask& t, const uint8_t* row, int64_t b0, float* out) {
  const int64_t c = t.w.cols;
  const WeightType type = t.w.type;
  const QuantizedActs* a = t.acts + b0;
  const float* x = t.x + b0 * t.x_stride;
  switch (type) {
    case WeightType::kF32:
      return DotFloat<WeightType::kF32, NB>(row, c, x, t.x_stride, out);
    case WeightType::kF16:
      return DotFloat<WeightType::kF16, NB>(row, c, x, t.x_stride, out);
    case WeightType::kBF16:
      return DotFloat<WeightType::kBF16, NB>(row, c, x, t.x_stride, out);
    case WeightType::kQ4_0:
      return DotQuantized<Q4_0, NB>(type, row, c, a, out);
    case WeightType::kQ4_1:
      return DotQuantized<Q4_1, NB>(type, row, c, a, out);
    case WeightType::kQ5_0:
      return DotQuantized<Q5_0, NB>(type, row, c, a, out);
    case WeightType::kQ5_1:
      return DotQuantized<Q5_1, NB>(type, row, c, a, out);
    case WeightType::kQ8_0:
      return DotQuantized<Q8_0, NB>(type, row, c, a, out);
    case WeightType::kQ4_K:
      return DotQuantized<Q45K<false>, NB>(type, row, c, a, out);
    case WeightType::kQ5_K:
      return DotQuantized<Q45K<true>, NB>(type, row, c, a, out);
    case WeightType::kQ6_K:
      return DotQuantized<Q6K, NB>(type, row, c, a, out);
  }
}

void RowsAvx512(const RowsTask& t, int64_t begin, int64_t end) {
  float out[kMaxNb];
  for (int64_t r = begin; r < end; ++r) {
    const auto* row = static_cast<const uint8_t*>(t.w.data) + r * t.w.row_stride_bytes;
    for (int64_t b0 = 0; b0 < t.batch; b0 += kMaxNb) {
      const int64_t nb = std::min<int64_t>(kMaxNb, t.batch - b0);
      switch (nb) {
        case 1:
          DotRow<1>(t, row, b0, out);
          break;
        case 2:
          DotRow<2>(t, row, b0, out);
          break;
        case 3:
          DotRow<3>(t, row, b0, out);
          break;
        default:
          DotRow<4>(t, row, b0, out);
          break;
      }
      for (int64_t k = 0; k < nb; ++k) t.y[(b0 + k) * t.y_stride + r] = out[k];
    }
  }
}

// Per block of 32: d = max|x| / 127, qs = round(x * 127 / max|x|); the two
// zmm of a block are exactly its two 16-element halves.
void QuantizeActsAvx512(const float* x, int64_t cols, const QuantizedActs& out) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float max_abs = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = max_abs / 127;
    const __m512 id = _mm512_set1_ps(max_abs != 0 ? 127 / max_abs : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
    _mm_store_si128(reinterpret_cast<__m128i*>(out.qs + 32 * b), _mm512_cvtepi32_epi8(q0));
    _mm_store_si128(reinterpret_cast<__m128i*>(out.qs + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
    const float s0 = d * _mm512_reduce_add_epi32(q0), s1 = d * _mm512_reduce_add_epi32(q1);
    out.d[b] = d;
    out.s16[2 * b] = s0;
    out.s16[2 * b + 1] = s1;
    out.s32[b] = s0 + s1;
  }
}

}  // namespace

const IsaKernels& Avx512Kernels() {
  static constexpr IsaKernels kKernels = {&QuantizeActsAvx512, &RowsAvx512};
  return kKernels;
}

}  // namespace waste::kernels::internal
