// The activation side of the AVX-512 loops: each vector quantized once per
// call (per block of 32) and laid out in the order its weight type's codes
// want (ActOrder, matvec_avx512_internal.h). Compiled with AVX512_COPTS.
#include <immintrin.h>

#include <array>
#include <cstdint>

#include "daemon/kernels/matvec_avx512_internal.h"
#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels::internal::avx512 {
namespace {

ActOrder OrderFor(WeightType type) {
  switch (type) {
    case WeightType::kQ4_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS:
    case WeightType::kMXFP4:
      return ActOrder::kNibble32;
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
      return ActOrder::kNibbleK;
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
      return ActOrder::kLane16;
    case WeightType::kQ6_K:
      return ActOrder::kPairs16;
    case WeightType::kQ8_0:
    case WeightType::kIQ2_XXS:
    case WeightType::kIQ3_XXS:
    case WeightType::kIQ3_S:
    case WeightType::kIQ1_S:
      return ActOrder::kHalves32;
    case WeightType::kIQ2_XS:
    case WeightType::kIQ2_S:
    case WeightType::kIQ1_M:
      return ActOrder::kPairs16;
    default:
      return ActOrder::kNatural;
  }
}

}  // namespace

// Per block of 32: d = max|x| / 127, qs = round(x * 127 / max|x|); the two
// zmm of a block are exactly its two 16-element halves. Then, per 256
// elements, the reordered copy qp and the d/s32 pairs ds.
void QuantizeActsAvx512(WeightType type, const float* x, int64_t cols, const QuantizedActs& out) {
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
  const int64_t units = cols / 256;
  const ActOrder order = OrderFor(type);
  if (order == ActOrder::kLane16) return ReorderLane16(type == WeightType::kQ3_K, units, out);
  for (int64_t u = 0; u < units; ++u) {
    _mm256_store_ps(out.ds + 16 * u, _mm256_load_ps(out.d + 8 * u));
    _mm256_store_ps(out.ds + 16 * u + 8, _mm256_load_ps(out.s32 + 8 * u));
  }
  if (order == ActOrder::kNatural) return;
  // The groups past the last whole unit (only the 32-element-block types,
  // kNibble32 and kHalves32, have them) are one more unit, zero-padded: the
  // loops run it as a partial unit (LoadTail), whose absent groups then
  // multiply zeros.
  const int tail_groups = static_cast<int>(cols / 32 % 8);
  if (tail_groups != 0) {
    const __mmask8 present = static_cast<__mmask8>((1u << tail_groups) - 1);
    _mm256_store_ps(out.ds + 16 * units, _mm256_maskz_loadu_ps(present, out.d + 8 * units));
    _mm256_store_ps(out.ds + 16 * units + 8, _mm256_maskz_loadu_ps(present, out.s32 + 8 * units));
  }
  const int64_t chunks = 2 * units + (tail_groups != 0 ? 2 : 0);
  // The 64 bytes of qs at `offset`, zeros past its cols (masked: no read).
  auto qs64 = [&](int64_t offset) {
    const int64_t n = cols - offset;
    if (n >= 64) return _mm512_load_si512(out.qs + offset);
    return _mm512_maskz_loadu_epi8(n > 0 ? (uint64_t{1} << n) - 1 : 0, out.qs + offset);
  };
  alignas(64) static constexpr auto kNibbleIndex = [] {
    std::array<std::array<uint8_t, 64>, 2> t{};
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 16; ++j) t[n][16 * i + j] = static_cast<uint8_t>(32 * i + 16 * n + j);
    return t;
  }();
  if (order == ActOrder::kHalves32) {
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i n0 = qs64(128 * c), n1 = qs64(128 * c + 64);
      PairHalves32(&n0, &n1);
      _mm512_store_si512(out.qp + 128 * c, n0);
      _mm512_store_si512(out.qp + 128 * c + 64, n1);
    }
    return;
  }
  if (order == ActOrder::kPairs16) {
    for (int64_t c = 0; c < 2 * units; ++c) {
      const __m512i n0 = _mm512_load_si512(out.qs + 128 * c);
      const __m512i n1 = _mm512_load_si512(out.qs + 128 * c + 64);
      _mm512_store_si512(out.qp + 128 * c, _mm512_permutex2var_epi32(n0, Pairs16Index(0), n1));
      _mm512_store_si512(out.qp + 128 * c + 64, _mm512_permutex2var_epi32(n0, Pairs16Index(1), n1));
    }
    return;
  }
  if (order == ActOrder::kNibble32) {
    for (int64_t c = 0; c < chunks; ++c) {
      const __m512i n0 = qs64(128 * c), n1 = qs64(128 * c + 64);
      _mm512_store_si512(out.qp + 128 * c, _mm512_permutex2var_epi8(
                                               n0, _mm512_load_si512(kNibbleIndex[0].data()), n1));
      _mm512_store_si512(
          out.qp + 128 * c + 64,
          _mm512_permutex2var_epi8(n0, _mm512_load_si512(kNibbleIndex[1].data()), n1));
    }
    return;
  }
  // kNibbleK: per 256, zmm v of qp is [lane v of zmm 0 of qs | of zmm 1 | of
  // zmm 2 | of zmm 3] (a transpose of 128-bit lanes): 16 elements each of
  // groups 0, 2, 4, 6 (v = 0: elements 0-15; 1: 16-31), then of 1, 3, 5, 7.
  for (int64_t u = 0; u < units; ++u) {
    __m512i n[4], t[4];
#pragma GCC unroll 4
    for (int z = 0; z < 4; ++z) n[z] = _mm512_load_si512(out.qs + 256 * u + 64 * z);
    t[0] = _mm512_shuffle_i32x4(n[0], n[1], 0x44);  // [0.0 0.1 1.0 1.1]
    t[1] = _mm512_shuffle_i32x4(n[0], n[1], 0xEE);  // [0.2 0.3 1.2 1.3]
    t[2] = _mm512_shuffle_i32x4(n[2], n[3], 0x44);
    t[3] = _mm512_shuffle_i32x4(n[2], n[3], 0xEE);
    _mm512_store_si512(out.qp + 256 * u, _mm512_shuffle_i32x4(t[0], t[2], 0x88));
    _mm512_store_si512(out.qp + 256 * u + 64, _mm512_shuffle_i32x4(t[0], t[2], 0xDD));
    _mm512_store_si512(out.qp + 256 * u + 128, _mm512_shuffle_i32x4(t[1], t[3], 0x88));
    _mm512_store_si512(out.qp + 256 * u + 192, _mm512_shuffle_i32x4(t[1], t[3], 0xDD));
  }
}

}  // namespace waste::kernels::internal::avx512
