// Reference quantizers (f32 -> weight blocks) and the activation quantizer the
// integer dot products use.
//
// The weight quantizers produce valid ggml blocks (what llama.cpp's
// dequantize_row_* decodes) with a plain round-to-nearest scheme (Q2_K, Q3_K
// and the IQ4 types add a small unweighted least-squares scale search per
// block, which 2-3 bits and a non-uniform grid need to be usable); they are
// for tests, benchmarks and tools, not for matching llama-quantize's output
// bit for bit (it searches scales harder and weighs them by an importance
// matrix: QuantizeRowWeighted below does that). The codebook types (IQ1,
// IQ2, IQ3) round to the nearest lattice point's codebook entry
// (quantize_iq.h).
#ifndef WASTE_DAEMON_KERNELS_QUANTIZE_H_
#define WASTE_DAEMON_KERNELS_QUANTIZE_H_

#include <cstddef>
#include <cstdint>

#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels {

// Encodes `n` floats as a row of `type` into `dst` (RowBytes(type, n) bytes).
// `n` must be a multiple of the type's block size (CHECKed).
void QuantizeRow(WeightType type, const float* src, void* dst, int64_t n);

// QuantizeRow weighted by an importance per element (`importance`: n
// floats, the mean squared activation of each column the row multiplies, as
// an importance matrix holds them; see daemon/quality/imatrix.h). The
// K-quants, IQ4_NL/IQ4_XS and Q4_0..Q5_1 then search their scales by
// weighted least squares over candidate scales, minimizing
// sum_i w_i (x_i - y_i)^2 with w_i = importance_i * sqrt(2 mean(x^2) + x_i^2)
// (quantize_weighted.cc); the codebook types weigh their entry and scale
// choices the same way (quantize_iq.h). F32/F16/BF16/Q8_0 round as
// QuantizeRow does. Null `importance` is QuantizeRow. Deterministic: the
// same input gives the same bytes on every machine.
void QuantizeRowWeighted(WeightType type, const float* src, void* dst, int64_t n,
                         const float* importance);

// Types that llama.cpp refuses to quantize without an importance matrix
// (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S): their plain search leaves too
// much error for a usable model.
bool QuantizeRequiresImportance(WeightType type);

// An activation vector quantized to int8 in blocks of 32, the counterpart of
// every quantized weight type (Q8_0-like for the legacy quants; the K-quants
// use it too, with 8 activation blocks per weight super-block). Scales are
// f32, not f16: they cost nothing in bandwidth and keep the error to the int8
// rounding alone. The block sums let a kernel fold a weight's zero point or
// min into one multiply per block instead of per element:
//   sum_i w_i a_i, w_i = dw * q_i + c  ==  dw * d * sum_i q_i qa_i + c * s32.
// Pointers refer to caller-owned scratch (see ActsScratchBytes); cols is a
// multiple of 32.
struct QuantizedActs {
  int8_t* qs = nullptr;  // [cols], 64-byte aligned.
  float* d = nullptr;    // [cols / 32] scale: x ~= d * qs.
  float* s32 = nullptr;  // [cols / 32] d * (sum of the block's 32 qs).
  float* s16 = nullptr;  // [cols / 16] d * (sum of each 16 qs), for Q6_K.
  // Filled by the AVX-512 quantizer only, for its loops (matvec_avx512.cc):
  // qs reordered per 256 elements so that weight bytes feed vpdpbusd as
  // they lie in memory (the activation moves once per call, the weights never),
  // and per 256 elements the 8 d then the 8 s32, one zmm load per unit
  // (Q2_K, Q3_K: 32 floats per 256, see ActOrder::kLane16). The groups of 32
  // past the last whole 256 (rows of the 32-element-block types) make one
  // more unit there, zero-padded, which those loops (and the tiled ones,
  // below) run as a partial unit.
  int8_t* qp = nullptr;  // [ceil(cols / 256) * 256], 64-byte aligned.
  float* ds = nullptr;   // [ceil(cols / 256) * 32], 64-byte aligned.
  // Filled by the tiled quantizer only (matmul_avx2.cc), in its lane order
  // (qp and ds too): a weight type's zero point times the int sum of each
  // block's qs, so that the integer dot comes out exact without a float bias
  // (0 in a padded last unit's absent blocks); for Q3_K, per 16 qs (see
  // Q3KZeroPoints in matmul_avx2_acts.cc).
  int32_t* zs = nullptr;  // [max(cols / 16, ceil(cols / 256) * 8)], 64-byte aligned.
};

// Bytes of scratch for one quantized activation vector of `cols` elements,
// including alignment padding.
size_t ActsScratchBytes(int64_t cols);
// Carves a QuantizedActs for `cols` elements out of `buf` (64-byte aligned,
// ActsScratchBytes(cols) long).
QuantizedActs LayoutActs(void* buf, int64_t cols);

// Scalar reference activation quantizer: per block of 32, d = max|x| / 127,
// qs = round(x / d). Every |x - d * qs| <= d / 2, which bounds the error of a
// quantized dot product (see matvec_test.cc).
void QuantizeActsRef(const float* x, int64_t cols, const QuantizedActs& out);

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_QUANTIZE_H_
