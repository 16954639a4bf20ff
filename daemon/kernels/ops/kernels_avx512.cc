// AVX-512 kernels: 16-lane traits for the shared body in
// vector_kernels.inc, with native masked loads/stores for ragged tails.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq (+ AVX2/FMA/F16C);
// reached only through Avx512Kernels() after CPU detection.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "daemon/kernels/ops/kernels_internal.h"
#include "daemon/kernels/ops/vec_math_avx512.h"

namespace waste::kernels::ops::internal {
namespace {

struct Avx512 {
  using Vec = __m512;
  static constexpr int kWidth = 16;
  // 4 heads x 4 zmm accumulators + 4 V vectors fit the 32 zmm registers.
  static constexpr int kPvTile = 4;

  static __mmask16 TailMask(int r) { return static_cast<__mmask16>((1u << r) - 1u); }
  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Set1(float x) { return _mm512_set1_ps(x); }
  static Vec Load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec LoadPartial(const float* p, int r) { return _mm512_maskz_loadu_ps(TailMask(r), p); }
  static Vec LoadPartialFill(const float* p, int r, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), TailMask(r), p);
  }
  static void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static void StorePartial(float* p, Vec v, int r) { _mm512_mask_storeu_ps(p, TailMask(r), v); }
  static Vec LoadHalf(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Vec LoadHalfPartial(const uint16_t* p, int r) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(TailMask(r), p));
  }
  static void StoreHalf(uint16_t* p, Vec v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void StoreHalfPartial(uint16_t* p, Vec v, int r) {
    _mm256_mask_storeu_epi16(p, TailMask(r),
                             _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec Sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec Mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec Max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static Vec Exp(Vec x) { return Exp512(x); }
  static Vec Silu(Vec x) { return Silu512(x); }
  static Vec Gelu(Vec x) { return Gelu512(x); }
  static float HSum(Vec v) { return HorizontalSum512(v); }
  static float HMax(Vec v) { return HorizontalMax512(v); }
  static Vec SwapPairs(Vec v) { return _mm512_permute_ps(v, 0xb1); }
};

#include "daemon/kernels/ops/vector_kernels.inc"

}  // namespace

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = MakeVectorKernels<Avx512>();
  return kKernels;
}

}  // namespace waste::kernels::ops::internal
