// Horizontal sums, 4-byte dots and the f16 scale gather of the AVX2 loops,
// inline. Only for translation units compiled with AVX2_COPTS or
// AVXVNNI_COPTS (exactly): every copy of these inline functions must be the
// same code, so an AVX-512 file must not take one, and each of the two AVX2
// builds has its own (avx2_variant.h).
// Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_AVX2_SUMS_H_
#define WASTE_DAEMON_KERNELS_AVX2_SUMS_H_

#if !defined(__AVX2__) || defined(__AVX512F__)
#error "avx2_sums.h is for the AVX2_COPTS translation units only"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "daemon/kernels/avx2_variant.h"

namespace waste::kernels::internal::WASTE_AVX2_NS {

// (x0 + x2) + (x1 + x3) of lo128 + hi128.
[[gnu::always_inline]] inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// HorizontalSum of 4 vectors: each step of its additions for the 4 at once,
// so lane r is HorizontalSum(v[r]) to the bit.
[[gnu::always_inline]] inline __m128 HorizontalSums4(const __m256 v[4]) {
  // [lo + hi of v0 | of v1], [of v2 | of v3].
  const __m256 p01 = _mm256_add_ps(_mm256_permute2f128_ps(v[0], v[1], 0x31),
                                   _mm256_permute2f128_ps(v[0], v[1], 0x20));
  const __m256 p23 = _mm256_add_ps(_mm256_permute2f128_ps(v[2], v[3], 0x31),
                                   _mm256_permute2f128_ps(v[2], v[3], 0x20));
  // Per 128-bit lane: [x0 + x2, x1 + x3] of v0 (v1), then of v2 (v3).
  const __m256 h = _mm256_add_ps(_mm256_shuffle_ps(p01, p23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(p01, p23, _MM_SHUFFLE(3, 2, 3, 2)));
  // Per 128-bit lane: [v0, v2, ..] ([v1, v3, ..]).
  const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(h, h, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(h, h, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm_unpacklo_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// The f16 at p + kStride * j, j < 8 (kPartial: j < n, 0 past: a row's
// last blocks, none read past it), as f32: put together in integer
// registers, one conversion for the 8.
template <int kStride, bool kPartial>
[[gnu::always_inline]] inline __m256 GatherF16x8(const uint8_t* p, int n) {
  auto word = [&](int j) -> uint64_t {
    uint16_t h = 0;
    if (!kPartial || j < n) std::memcpy(&h, p + kStride * j, sizeof(h));
    return h;
  };
  uint64_t lo = 0, hi = 0;
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    lo |= word(j) << (16 * j);
    hi |= word(j + 4) << (16 * j);
  }
  return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo)));
}

// Whether this build of the AVX2 loops has AVX-VNNI (see avx2_variant.h).
#ifdef __AVXVNNI__
inline constexpr bool kVnni = true;
#else
inline constexpr bool kVnni = false;
#endif

// Per int32 lane, the dot of its 4 u8 `codes` with its 4 s8 `acts`: one
// vpdpbusd with AVX-VNNI, else vpmaddubsw + vpmaddwd. The same integers
// either way as long as no pair of adjacent products passes int16, which
// the callers' codes (at most 15 with any activation, or magnitudes at most
// 128 with |act| <= 127) make sure of; so the two builds give the same
// results to the bit.
[[gnu::always_inline]] inline __m256i DotBytes(__m256i codes, __m256i acts) {
#ifdef __AVXVNNI__
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), codes, acts);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, acts), _mm256_set1_epi16(1));
#endif
}

// acc + DotBytes(codes, acts).
[[gnu::always_inline]] inline __m256i AddDotBytes(__m256i acc, __m256i codes, __m256i acts) {
#ifdef __AVXVNNI__
  return _mm256_dpbusd_avx_epi32(acc, codes, acts);
#else
  return _mm256_add_epi32(acc, DotBytes(codes, acts));
#endif
}

}  // namespace waste::kernels::internal::WASTE_AVX2_NS

#endif  // WASTE_DAEMON_KERNELS_AVX2_SUMS_H_
