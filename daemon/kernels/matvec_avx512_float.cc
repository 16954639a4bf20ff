// The AVX-512 loop of the float types (F32, F16, BF16): their rows against
// f32 activations, 32 elements a step, two accumulators per vector, a row's
// last elements (past a multiple of 32) dequantized and summed in scalar.
#include <immintrin.h>

#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/matvec_avx512_internal.h"
#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels::internal::avx512 {
namespace {

template <WeightType T>
[[gnu::always_inline]] inline __m512 Load16(const uint8_t* p) {
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
    if constexpr (kPrefetchBytes > 0) {
#pragma GCC unroll 2
      for (int l = 0; l < kElem / 2; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(row) + i * kElem + kPrefetchBytes + 64 * l,
                     _MM_HINT_T0);
      }
    }
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

}  // namespace

template <int NB>
void DotFloatAvx512(WeightType type, const uint8_t* row, int64_t cols, const float* x,
                    int64_t x_stride, float* out) {
  switch (type) {
    case WeightType::kF32:
      return DotFloat<WeightType::kF32, NB>(row, cols, x, x_stride, out);
    case WeightType::kF16:
      return DotFloat<WeightType::kF16, NB>(row, cols, x, x_stride, out);
    default:
      return DotFloat<WeightType::kBF16, NB>(row, cols, x, x_stride, out);
  }
}

template void DotFloatAvx512<1>(WeightType, const uint8_t*, int64_t, const float*, int64_t, float*);
template void DotFloatAvx512<2>(WeightType, const uint8_t*, int64_t, const float*, int64_t, float*);
template void DotFloatAvx512<3>(WeightType, const uint8_t*, int64_t, const float*, int64_t, float*);
template void DotFloatAvx512<4>(WeightType, const uint8_t*, int64_t, const float*, int64_t, float*);

}  // namespace waste::kernels::internal::avx512
