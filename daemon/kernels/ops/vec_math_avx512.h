// Internal: AVX-512 vector math shared by the AVX-512 translation units.
// Include only from files compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq. Everything has
// internal linkage so no AVX-512 code can leak into other translation units
// through the linker's choice among duplicate inline definitions.
#ifndef WASTE_DAEMON_KERNELS_OPS_VEC_MATH_AVX512_H_
#define WASTE_DAEMON_KERNELS_OPS_VEC_MATH_AVX512_H_

#include <immintrin.h>

namespace waste::kernels::ops::internal {
namespace {

inline float HorizontalSum512(__m512 v) { return _mm512_reduce_add_ps(v); }

inline float HorizontalMax512(__m512 v) { return _mm512_reduce_max_ps(v); }

// exp(x) to ~2 ulp (Cephes polynomial). Inputs are clamped to
// [-87.3, 88.0], so exp of very negative x is ~1e-38 rather than 0, which is
// harmless for softmax and the sigmoid forms below.
inline __m512 Exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33654f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  // scalef multiplies by 2^n directly (no exponent-field arithmetic).
  return _mm512_scalef_ps(p, n);
}

// x * sigmoid(k * x) = x / (1 + exp(-k x)).
inline __m512 XSigmoid512(__m512 x, __m512 kx) {
  const __m512 e = Exp512(_mm512_sub_ps(_mm512_setzero_ps(), kx));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

inline __m512 Silu512(__m512 x) { return XSigmoid512(x, x); }

// ggml's tanh GELU: 0.5 x (1 + tanh(u)) == x * sigmoid(2u), with
// u = sqrt(2/pi) x (1 + 0.044715 x^2).
inline __m512 Gelu512(__m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 inner = _mm512_fmadd_ps(x2, _mm512_set1_ps(0.044715f), _mm512_set1_ps(1.0f));
  const __m512 two_u = _mm512_mul_ps(_mm512_mul_ps(x, inner), _mm512_set1_ps(1.5957691216057308f));
  return XSigmoid512(x, two_u);
}

}  // namespace
}  // namespace waste::kernels::ops::internal

#endif  // WASTE_DAEMON_KERNELS_OPS_VEC_MATH_AVX512_H_
