// The AVX2 loops' shared inline helpers: unaligned field loads, unrolling,
// horizontal sums, 4-byte dots, the f16 scale gather and the dword transpose
// (forced inline: see inlining_check.sh). Only for translation units compiled with AVX2_COPTS or
// AVXVNNI_COPTS (exactly): every copy of these inline functions must be the
// same code, so an AVX-512 file must not take one, and each of the two AVX2
// builds has its own (avx2_variant.h).
// Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_AVX2_INLINE_H_
#define WASTE_DAEMON_KERNELS_AVX2_INLINE_H_

#if !defined(__AVX2__) || defined(__AVX512F__)
#error "avx2_inline.h is for the AVX2_COPTS translation units only"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "daemon/kernels/avx2_variant.h"
#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels::internal::WASTE_AVX2_NS {

template <typename F, int... J>
[[gnu::always_inline]] inline void UnrollImpl(F&& f, std::integer_sequence<int, J...>) {
  (f(std::integral_constant<int, J>()), ...);
}
// Calls f(std::integral_constant<int, j>()) for j < N, so that j is a
// compile-time constant in f's body (immediate shifts, constant shuffles).
template <int N, typename F>
[[gnu::always_inline]] inline void Unroll(F&& f) {
  UnrollImpl(f, std::make_integer_sequence<int, N>());
}

// 8 f16 at p + kStride * i as f32. Each f16 comes in with a dword
// broadcast from memory (a load, no shuffle), f16 i in half i % 2 of the
// dword (for odd i the dword starts 2 bytes before it), then blends put word
// i in place: 7 blends where scalar loads, shifts and inserts took ~25
// instructions.
template <int kStride>
[[gnu::always_inline]] inline __m256 GatherHalves(const uint8_t* p) {
  static_assert(kStride >= 2);
  auto dword = [&](int offset) {
    return _mm_castps_si128(_mm_broadcast_ss(reinterpret_cast<const float*>(p + offset)));
  };
  // Dword m of pair m: f16 2m in its low half, 2m + 1 in its high half.
  auto pair = [&](auto m) {
    constexpr int kM = decltype(m)::value;
    return _mm_blend_epi16(dword(2 * kM * kStride), dword((2 * kM + 1) * kStride - 2), 0xAA);
  };
  const __m128i h = _mm_blend_epi32(_mm_blend_epi32(pair(std::integral_constant<int, 0>()),
                                                    pair(std::integral_constant<int, 1>()), 0x2),
                                    _mm_blend_epi32(pair(std::integral_constant<int, 2>()),
                                                    pair(std::integral_constant<int, 3>()), 0x8),
                                    0xC);
  return _mm256_cvtph_ps(h);
}

// In-lane 4x4 transpose of dwords: out[i] = [in0.i, in1.i, in2.i, in3.i |
// in0.(4+i), in1.(4+i), in2.(4+i), in3.(4+i)].
[[gnu::always_inline]] inline void Transpose4(const __m256i in[4], __m256i out[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(in[0], in[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(in[0], in[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(in[2], in[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(in[2], in[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

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
  auto word = [&](int j) -> uint64_t { return !kPartial || j < n ? LoadU16(p + kStride * j) : 0; };
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

#endif  // WASTE_DAEMON_KERNELS_AVX2_INLINE_H_
