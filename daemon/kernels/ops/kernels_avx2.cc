// AVX2 + FMA + F16C kernels: 8-lane traits for the shared body in
// vector_kernels.inc. Compiled with -mavx2 -mfma -mf16c; reached only
// through Avx2Kernels() after CPU detection.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "daemon/kernels/ops/kernels_internal.h"
#include "daemon/kernels/ops/vec_math_avx2.h"

namespace waste::kernels::ops::internal {
namespace {

struct Avx2 {
  using Vec = __m256;
  static constexpr int kWidth = 8;
  // 4 heads x 2 ymm accumulators + 2 V vectors + a broadcast fit the 16 ymm
  // registers; a wider tile would spill in attention's P*V loop.
  static constexpr int kPvTile = 2;

  static __m256i TailMask(int r) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Vec Zero() { return _mm256_setzero_ps(); }
  static Vec Set1(float x) { return _mm256_set1_ps(x); }
  static Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  // Lanes >= r read as zero and touch no memory.
  static Vec LoadPartial(const float* p, int r) { return _mm256_maskload_ps(p, TailMask(r)); }
  static Vec LoadPartialFill(const float* p, int r, float fill) {
    const __m256i m = TailMask(r);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static void StorePartial(float* p, Vec v, int r) { _mm256_maskstore_ps(p, TailMask(r), v); }
  static Vec LoadHalf(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Vec LoadHalfPartial(const uint16_t* p, int r) {
    uint16_t buf[8] = {};
    std::memcpy(buf, p, sizeof(uint16_t) * r);
    return LoadHalf(buf);
  }
  static void StoreHalf(uint16_t* p, Vec v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void StoreHalfPartial(uint16_t* p, Vec v, int r) {
    uint16_t buf[8];
    StoreHalf(buf, v);
    std::memcpy(p, buf, sizeof(uint16_t) * r);
  }
  static Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec Sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec Mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec Max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static Vec Exp(Vec x) { return Exp256(x); }
  static Vec Silu(Vec x) { return Silu256(x); }
  static Vec Gelu(Vec x) { return Gelu256(x); }
  static float HSum(Vec v) { return HorizontalSum256(v); }
  static float HMax(Vec v) { return HorizontalMax256(v); }
  // [x0, x1, x2, x3, ...] -> [x1, x0, x3, x2, ...].
  static Vec SwapPairs(Vec v) { return _mm256_permute_ps(v, 0xb1); }
};

#include "daemon/kernels/ops/vector_kernels.inc"

}  // namespace

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = MakeVectorKernels<Avx2>();
  return kKernels;
}

}  // namespace waste::kernels::ops::internal
