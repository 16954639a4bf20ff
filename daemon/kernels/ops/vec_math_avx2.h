// Internal: AVX2/FMA vector math shared by the AVX2 translation units.
// Include only from files compiled with -mavx2 -mfma -mf16c. Everything has
// internal linkage so no AVX2 code can leak into other translation units
// through the linker's choice among duplicate inline definitions.
#ifndef WASTE_DAEMON_KERNELS_OPS_VEC_MATH_AVX2_H_
#define WASTE_DAEMON_KERNELS_OPS_VEC_MATH_AVX2_H_

#include <immintrin.h>

namespace waste::kernels::ops::internal {
namespace {

inline float HorizontalSum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HorizontalMax256(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(x) to ~2 ulp (Cephes polynomial). Inputs are clamped to
// [-87.3, 88.0], so exp of very negative x is ~1e-38 rather than 0, which is
// harmless for softmax and the sigmoid forms below.
inline __m256 Exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i pow2 =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2));
}

// x * sigmoid(k * x) = x / (1 + exp(-k x)).
inline __m256 XSigmoid256(__m256 x, __m256 kx) {
  const __m256 e = Exp256(_mm256_sub_ps(_mm256_setzero_ps(), kx));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

inline __m256 Silu256(__m256 x) { return XSigmoid256(x, x); }

// ggml's tanh GELU: 0.5 x (1 + tanh(u)) == x * sigmoid(2u), with
// u = sqrt(2/pi) x (1 + 0.044715 x^2).
inline __m256 Gelu256(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 inner = _mm256_fmadd_ps(x2, _mm256_set1_ps(0.044715f), _mm256_set1_ps(1.0f));
  const __m256 two_u = _mm256_mul_ps(_mm256_mul_ps(x, inner), _mm256_set1_ps(1.5957691216057308f));
  return XSigmoid256(x, two_u);
}

}  // namespace
}  // namespace waste::kernels::ops::internal

#endif  // WASTE_DAEMON_KERNELS_OPS_VEC_MATH_AVX2_H_
