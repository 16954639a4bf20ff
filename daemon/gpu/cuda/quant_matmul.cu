// Products of quantized weight matrices with f32 activations on the GPU:
// y[b][r] = dot(row r of W, x[b]) for the types DeviceComputes() lists:
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL,
// IQ4_XS (the codebook types IQ1..IQ3 and Q2_K/Q3_K stay on the CPU).
//
// The block layouts are ggml's (daemon/kernels/quant_blocks.h, mirrored
// below by byte offsets; the device test checks every type against the CPU
// dequantizer). Activations stay f32 (no int8 rounding as on the CPU), so
// results match the dequantized f32 dot to float rounding (elements are
// dequantized in ggml's order of products, (d * scale) * code, as the CPU's
// DequantizeRow; nvcc may contract a multiply-add into one rounding).
//
// Two kernels, a warp per weight row or a few rows, a warp shuffle summing
// the lanes:
//  - MatMulGroupKernel, for the block types and F16/BF16: each lane takes 8 consecutive
//    elements at a time, decoding their sub-block's scale once, with the
//    activations as float4 loads (Q4_K and Q5_K headers as words and codes
//    as 8-byte loads where rows are 16-byte aligned), two or four rows per
//    warp for one vector (RowsPerWarp1) and four for a batch. On an H200
//    (cuda_device_test's ProductThroughput, 4096 columns, 65536 rows): Q4_K
//    854 GB/s of weights for one vector and 436 for 8, Q8_0 1633, IQ4_NL
//    736, F16 and BF16 3.4 TB/s (946 GB/s element by element); for 8
//    vectors 290-600, F16 1250.
//  - MatMulKernel, the plain first kernel (every lane one element at a
//    time, its block's scale decoded again for each): F32, and the other
//    types with WASTE_CUDA_ELEMENTWISE=1 or unaligned activations (or
//    unaligned F16/BF16 rows). Q4_K 136 GB/s, F32 2.3 TB/s.
// Neither is near the HBM's 4.8 TB/s for the block types: the next step is
// int8 activations with dp4a and wider weight loads, as ggml's mmvq does.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "daemon/gpu/cuda/cuda_api.h"

namespace waste::gpu::cuda_api {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kBatchTile = 8;
// MatMulGroupKernel's default prefetch distance, in steps of 256 elements,
// and rows per warp for one vector. On an H200 (ProductThroughput, GB/s of
// weights, one vector), one row per warp without prefetch: Q4_K 508, Q8_0
// 1013, Q4_0 536, Q6_K 647, IQ4_XS 455; two rows (each activation load serves
// both), prefetching 4 steps: 730, 1633, 820, 838, 505; four rows: Q4_K 854,
// IQ4_XS 594, the others less than with two. The 7B-shaped Q4_K model's
// decode: 65.6 tok/s with one row, 83.0 with two, 85.3 with four.
// (Prefetch alone: +0-8 %.)
constexpr int kPrefetchSteps = 4;

// ggml type ids (kernels::WeightType).
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
                   kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ4_NL = 20, kIQ4_XS = 23, kBF16 = 30;

// (Of the type, or of its word-reading variant: 1000 + the type.)
__host__ __device__ constexpr int RowsPerWarp1(uint32_t type) {
  return type % 1000 == kQ4_K || type == kIQ4_XS ? 4 : 2;
}

// The 16 levels of IQ4_NL and IQ4_XS (kernels::kIq4NlValues). In global
// memory, not __constant__: a warp's lanes look up different levels, which
// the constant cache serves one address at a time and L1 at once.
__device__ const int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// The 4-bit code of element j < 32 of a Q4_0-style nibble array: low
// nibbles for j < 16, high nibbles of the same bytes for j >= 16.
__device__ __forceinline__ int Nibble(const uint8_t* qs, int j) {
  return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
}

// Bit j of a little-endian uint32 at p (Q5_0/Q5_1's qh).
__device__ __forceinline__ int Bit(const uint8_t* p, int j) { return (p[j >> 3] >> (j & 7)) & 1; }

__device__ __forceinline__ float HalfAt(const uint8_t* p) {
  const unsigned short bits = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(bits));
}

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (ggml's
// get_scale_min_k4).
__device__ __forceinline__ void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Element e of a row.
template <uint32_t kType>
__device__ __forceinline__ float Element(const uint8_t* row, int64_t e);

template <>
__device__ __forceinline__ float Element<kF32>(const uint8_t* row, int64_t e) {
  return reinterpret_cast<const float*>(row)[e];
}

template <>
__device__ __forceinline__ float Element<kF16>(const uint8_t* row, int64_t e) {
  return HalfAt(row + 2 * e);
}

template <>
__device__ __forceinline__ float Element<kBF16>(const uint8_t* row, int64_t e) {
  const uint32_t bits = static_cast<uint32_t>(row[2 * e] | (row[2 * e + 1] << 8)) << 16;
  return __uint_as_float(bits);
}

// BlockQ4_0: d (f16), qs[16]: element j < 16 low nibble of qs[j], j >= 16
// high nibble of qs[j - 16]; x = d * (q - 8).
template <>
__device__ __forceinline__ float Element<kQ4_0>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 5) * 18;
  const int j = static_cast<int>(e & 31);
  const int q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
  return HalfAt(b) * static_cast<float>(q - 8);
}

// BlockQ4_1: d, m (f16), qs[16]; x = d * q + m.
template <>
__device__ __forceinline__ float Element<kQ4_1>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 5) * 20;
  return HalfAt(b) * static_cast<float>(Nibble(b + 4, static_cast<int>(e & 31))) + HalfAt(b + 2);
}

// BlockQ5_0: d (f16), qh[4], qs[16]; bit 4 of element j is bit j of qh;
// x = d * (q - 16).
template <>
__device__ __forceinline__ float Element<kQ5_0>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 5) * 22;
  const int j = static_cast<int>(e & 31);
  const int q = Nibble(b + 6, j) | (Bit(b + 2, j) << 4);
  return HalfAt(b) * static_cast<float>(q - 16);
}

// BlockQ5_1: d, m (f16), qh[4], qs[16]; x = d * q + m.
template <>
__device__ __forceinline__ float Element<kQ5_1>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 5) * 24;
  const int j = static_cast<int>(e & 31);
  const int q = Nibble(b + 8, j) | (Bit(b + 4, j) << 4);
  return HalfAt(b) * static_cast<float>(q) + HalfAt(b + 2);
}

// BlockIQ4_NL: d (f16), qs[16]; x = d * kIq4Values[q].
template <>
__device__ __forceinline__ float Element<kIQ4_NL>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 5) * 18;
  return HalfAt(b) * static_cast<float>(kIq4Values[Nibble(b + 2, static_cast<int>(e & 31))]);
}

// BlockIQ4_XS: d (f16), scales_h (u16), scales_l[4], qs[128]. Group
// g = i / 32: ls = low 4 bits from nibble g % 2 of scales_l[g / 2], high 2
// bits at bit 2g of scales_h; codes qs[16g ..], nibbles as Q4_0;
// x = d * (ls - 32) * kIq4Values[q].
template <>
__device__ __forceinline__ float Element<kIQ4_XS>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 8) * 136;
  const int i = static_cast<int>(e & 255), g = i >> 5;
  const int scales_h = b[2] | (b[3] << 8);
  const int ls = ((b[4 + (g >> 1)] >> (4 * (g & 1))) & 0xF) | (((scales_h >> (2 * g)) & 3) << 4);
  const int q = Nibble(b + 8 + 16 * g, i & 31);
  return (HalfAt(b) * (ls - 32)) * static_cast<float>(kIq4Values[q]);
}

// BlockQ8_0: d (f16), qs[32] int8; x = d * q.
template <>
__device__ __forceinline__ float Element<kQ8_0>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 5) * 34;
  return HalfAt(b) * static_cast<float>(static_cast<int8_t>(b[2 + (e & 31)]));
}

// BlockQ4_K: d, dmin (f16), scales[12], qs[128]. Element i: sub-block i/32;
// in 64-element half h = i/64, j = i%64: low nibble of qs[32h + j] (j < 32)
// or high nibble of qs[32h + j - 32]; x = d * sc * q - dmin * m.
template <>
__device__ __forceinline__ float Element<kQ4_K>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 8) * 144;
  const int i = static_cast<int>(e & 255);
  int sc, m;
  ScaleMinK4(i >> 5, b + 4, &sc, &m);
  const uint8_t* qs = b + 16;
  const int h = i >> 6, j = i & 63;
  const int q = j < 32 ? (qs[32 * h + j] & 0xF) : (qs[32 * h + j - 32] >> 4);
  return (HalfAt(b) * sc) * static_cast<float>(q) - HalfAt(b + 2) * static_cast<float>(m);
}

// BlockQ5_K: as Q4_K with qh[32] before qs: bit 4 of element i is bit
// (i / 32) of qh[i % 32].
template <>
__device__ __forceinline__ float Element<kQ5_K>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 8) * 176;
  const int i = static_cast<int>(e & 255);
  const int sub = i >> 5;
  int sc, m;
  ScaleMinK4(sub, b + 4, &sc, &m);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  const int h = i >> 6, j = i & 63;
  int q = j < 32 ? (qs[32 * h + j] & 0xF) : (qs[32 * h + j - 32] >> 4);
  q |= ((qh[i & 31] >> sub) & 1) << 4;
  return (HalfAt(b) * sc) * static_cast<float>(q) - HalfAt(b + 2) * static_cast<float>(m);
}

// BlockQ6_K: ql[128], qh[64], scales[16] (int8), d (f16). Element i: half
// h = i/128, row-of-32 k = (i%128)/32, l = i%32: low 4 bits in
// ql[64h + l + 32 (k & 1)] (low nibble for k < 2), high 2 bits
// (qh[32h + l] >> 2k) & 3; scale scales[8h + l/16 + 2k]; x = d * s * (q - 32).
template <>
__device__ __forceinline__ float Element<kQ6_K>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 8) * 210;
  const int i = static_cast<int>(e & 255);
  const int h = i >> 7, k = (i & 127) >> 5, l = i & 31;
  const uint8_t low_byte = b[64 * h + l + 32 * (k & 1)];
  const int low = k < 2 ? (low_byte & 0xF) : (low_byte >> 4);
  const int high = (b[128 + 32 * h + l] >> (2 * k)) & 3;
  const int q = low | (high << 4);
  const int s = static_cast<int8_t>(b[192 + 8 * h + (l >> 4) + 2 * k]);
  return (HalfAt(b + 208) * s) * static_cast<float>(q - 32);
}

// Eight consecutive elements e0..e0+7 of a row (e0 a multiple of 8): every
// block type's sub-blocks are whole groups of 8, so a group shares one
// scale, decoded once, and its codes sit in consecutive bytes. Each value is
// computed as Element<kType> computes it.
template <uint32_t kType>
__device__ __forceinline__ void Group8(const uint8_t* row, int64_t e0, float v[8]);

// F16 and BF16: the 8 values of one 16-byte load (rows 16-byte aligned: the
// launch checks), each 16-bit value made a float by to_float.
template <typename ToFloat>
__device__ __forceinline__ void Halves8(const uint8_t* row, int64_t e0, float v[8],
                                        ToFloat to_float) {
  const uint4 h = *reinterpret_cast<const uint4*>(row + 2 * e0);
  const uint32_t words[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[2 * k] = to_float(words[k] & 0xFFFF);
    v[2 * k + 1] = to_float(words[k] >> 16);
  }
}

template <>
__device__ __forceinline__ void Group8<kF16>(const uint8_t* row, int64_t e0, float v[8]) {
  Halves8(row, e0, v, [](uint32_t bits) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  });
}

template <>
__device__ __forceinline__ void Group8<kBF16>(const uint8_t* row, int64_t e0, float v[8]) {
  Halves8(row, e0, v, [](uint32_t bits) { return __uint_as_float(bits << 16); });
}

// The nibbles of Q4_0-style qs for elements j0..j0+7 of a 32-block.
__device__ __forceinline__ void Nibbles8(const uint8_t* qs, int j0, int q[8]) {
  const uint8_t* p = qs + (j0 & 15);
  const int shift = j0 < 16 ? 0 : 4;
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k] = (p[k] >> shift) & 0xF;
}

template <>
__device__ __forceinline__ void Group8<kQ4_0>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 5) * 18;
  const float d = HalfAt(b);
  int q[8];
  Nibbles8(b + 2, static_cast<int>(e0 & 31), q);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = d * static_cast<float>(q[k] - 8);
}

template <>
__device__ __forceinline__ void Group8<kQ4_1>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 5) * 20;
  const float d = HalfAt(b), m = HalfAt(b + 2);
  int q[8];
  Nibbles8(b + 4, static_cast<int>(e0 & 31), q);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = d * static_cast<float>(q[k]) + m;
}

template <>
__device__ __forceinline__ void Group8<kQ5_0>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 5) * 22;
  const int j0 = static_cast<int>(e0 & 31);
  const float d = HalfAt(b);
  const int high = b[2 + (j0 >> 3)];  // Bits j0..j0+7 of qh.
  int q[8];
  Nibbles8(b + 6, j0, q);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = d * static_cast<float>((q[k] | (((high >> k) & 1) << 4)) - 16);
}

template <>
__device__ __forceinline__ void Group8<kQ5_1>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 5) * 24;
  const int j0 = static_cast<int>(e0 & 31);
  const float d = HalfAt(b), m = HalfAt(b + 2);
  const int high = b[4 + (j0 >> 3)];
  int q[8];
  Nibbles8(b + 8, j0, q);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = d * static_cast<float>(q[k] | (((high >> k) & 1) << 4)) + m;
}

template <>
__device__ __forceinline__ void Group8<kQ8_0>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 5) * 34;
  const float d = HalfAt(b);
  const uint8_t* qs = b + 2 + (e0 & 31);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = d * static_cast<float>(static_cast<int8_t>(qs[k]));
}

template <>
__device__ __forceinline__ void Group8<kIQ4_NL>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 5) * 18;
  const float d = HalfAt(b);
  int q[8];
  Nibbles8(b + 2, static_cast<int>(e0 & 31), q);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = d * static_cast<float>(kIq4Values[q[k]]);
}

template <>
__device__ __forceinline__ void Group8<kIQ4_XS>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 8) * 136;
  const int i0 = static_cast<int>(e0 & 255), g = i0 >> 5;
  const int scales_h = b[2] | (b[3] << 8);
  const int ls = ((b[4 + (g >> 1)] >> (4 * (g & 1))) & 0xF) | (((scales_h >> (2 * g)) & 3) << 4);
  const float dl = HalfAt(b) * (ls - 32);
  int q[8];
  Nibbles8(b + 8 + 16 * g, i0 & 31, q);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = dl * static_cast<float>(kIq4Values[q[k]]);
}

// Q4_K/Q5_K: the group's low nibbles (qs as in Element<kQ4_K>) and its
// sub-block's d * scale and dmin * min.
__device__ __forceinline__ void K4Group(const uint8_t* b, const uint8_t* qs, int i0, int q[8],
                                        float* dsc, float* dm) {
  int sc, m;
  ScaleMinK4(i0 >> 5, b + 4, &sc, &m);
  *dsc = HalfAt(b) * sc;
  *dm = HalfAt(b + 2) * static_cast<float>(m);
  const int h = i0 >> 6, j0 = i0 & 63;
  const uint8_t* p = qs + 32 * h + (j0 & 31);
  const int shift = j0 < 32 ? 0 : 4;
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k] = (p[k] >> shift) & 0xF;
}

template <>
__device__ __forceinline__ void Group8<kQ5_K>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 8) * 176;
  const int i0 = static_cast<int>(e0 & 255), sub = i0 >> 5;
  int q[8];
  float dsc, dm;
  K4Group(b, b + 48, i0, q, &dsc, &dm);
  const uint8_t* qh = b + 16 + (i0 & 31);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    v[k] = dsc * static_cast<float>(q[k] | (((qh[k] >> sub) & 1) << 4)) - dm;
  }
}

// Q4_K and Q5_K blocks (144 and 176 bytes) start 16-byte aligned in rows
// that do: these read a block's header as words and a group's codes as one
// 8-byte load instead of byte by byte (the values are K4Group's).
constexpr uint32_t kQ4_KWords = 1000 + kQ4_K, kQ5_KWords = 1000 + kQ5_K;

__device__ __forceinline__ float HalfBits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

__device__ __forceinline__ void K4GroupWords(const uint8_t* b, const uint8_t* qs, int i0, int q[8],
                                             float* dsc, float* dm) {
  const uint32_t* header = reinterpret_cast<const uint32_t*>(b);
  const uint32_t d = header[0], s1 = header[1], s2 = header[2];
  const int j = i0 >> 5, shift = 8 * (j & 3);
  int sc, m;
  if (j < 4) {
    sc = (s1 >> shift) & 63;
    m = (s2 >> shift) & 63;
  } else {  // ggml's get_scale_min_k4: the low 4 bits in scales[8..11].
    const uint32_t s3 = header[3] >> shift;
    sc = (s3 & 0xF) | (((s1 >> shift) >> 6 & 3) << 4);
    m = (s3 >> 4 & 0xF) | (((s2 >> shift) >> 6 & 3) << 4);
  }
  *dsc = HalfBits(d & 0xFFFF) * sc;
  *dm = HalfBits(d >> 16) * static_cast<float>(m);
  const int h = i0 >> 6, j0 = i0 & 63;
  const uint2 codes = *reinterpret_cast<const uint2*>(qs + 32 * h + (j0 & 31));
  const int nibble = j0 < 32 ? 0 : 4;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    q[k] = (codes.x >> (8 * k + nibble)) & 0xF;
    q[k + 4] = (codes.y >> (8 * k + nibble)) & 0xF;
  }
}

// Q4_K: x = d * scale * q - dmin * min.
template <bool kWords>
__device__ __forceinline__ void Q4KGroup8(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 8) * 144;
  int q[8];
  float dsc, dm;
  if constexpr (kWords) {
    K4GroupWords(b, b + 16, static_cast<int>(e0 & 255), q, &dsc, &dm);
  } else {
    K4Group(b, b + 16, static_cast<int>(e0 & 255), q, &dsc, &dm);
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = dsc * static_cast<float>(q[k]) - dm;
}

template <>
__device__ __forceinline__ void Group8<kQ4_K>(const uint8_t* row, int64_t e0, float v[8]) {
  Q4KGroup8<false>(row, e0, v);
}

template <>
__device__ __forceinline__ void Group8<kQ4_KWords>(const uint8_t* row, int64_t e0, float v[8]) {
  Q4KGroup8<true>(row, e0, v);
}

template <>
__device__ __forceinline__ void Group8<kQ5_KWords>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 8) * 176;
  const int i0 = static_cast<int>(e0 & 255), sub = i0 >> 5;
  int q[8];
  float dsc, dm;
  K4GroupWords(b, b + 48, i0, q, &dsc, &dm);
  const uint2 high = *reinterpret_cast<const uint2*>(b + 16 + (i0 & 31));
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    q[k] |= ((high.x >> (8 * k + sub)) & 1) << 4;
    q[k + 4] |= ((high.y >> (8 * k + sub)) & 1) << 4;
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = dsc * static_cast<float>(q[k]) - dm;
}

template <>
__device__ __forceinline__ void Group8<kQ6_K>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 8) * 210;
  const int i0 = static_cast<int>(e0 & 255);
  const int h = i0 >> 7, kk = (i0 & 127) >> 5, l0 = i0 & 31;
  const uint8_t* low = b + 64 * h + l0 + 32 * (kk & 1);
  const uint8_t* high = b + 128 + 32 * h + l0;
  const int low_shift = kk < 2 ? 0 : 4;
  const float ds = HalfAt(b + 208) * static_cast<int8_t>(b[192 + 8 * h + (l0 >> 4) + 2 * kk]);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int q = ((low[k] >> low_shift) & 0xF) | (((high[k] >> (2 * kk)) & 3) << 4);
    v[k] = ds * static_cast<float>(q - 32);
  }
}

// Bytes of a row's 256 elements (a K-type block, eight 32-blocks).
__host__ __device__ constexpr int StepBytes(uint32_t type) {
  switch (type % 1000) {
    case kQ4_0:
    case kIQ4_NL:
    case kQ4_K:
      return 144;
    case kQ4_1:
      return 160;
    case kQ5_0:
    case kQ5_K:
      return 176;
    case kQ5_1:
      return 192;
    case kQ8_0:
      return 272;
    case kQ6_K:
      return 210;
    case kIQ4_XS:
      return 136;
    case kF16:
    case kBF16:
      return 512;
    default:
      return 0;
  }
}

// Asks L2 for the 32-byte sector at p (no register waits on it).
__device__ __forceinline__ void PrefetchL2(const uint8_t* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// As MatMulKernel, with each lane taking a group of 8 consecutive elements
// at a time (a warp covers 256 elements, one K-quant block or eight 32-
// blocks, per step), so a group's scale is decoded once and its codes come
// from consecutive bytes; the group's activations come as two float4 loads
// (x and x_stride 16-byte aligned: the launch checks) and serve the warp's
// kRows consecutive weight rows. For the block types, whose rows are whole
// groups.
//
// `ahead` > 0: each step first asks L2 for the warp's rows' bytes `ahead`
// steps further on (a lane per 32-byte sector), so that more of the rows is
// in flight than the one step a warp waits on.
template <uint32_t kType, int kRows>
__global__ void MatMulGroupKernel(int64_t rows, int64_t cols, const uint8_t* __restrict__ w,
                                  int64_t row_stride, const float* __restrict__ x, int64_t x_stride,
                                  int64_t batch, float* __restrict__ y, int64_t y_stride,
                                  int ahead) {
  constexpr int kStep = StepBytes(kType);
  static_assert(kStep > 0 && kStep <= 32 * 32);
  const int lane = threadIdx.x & 31;
  const int64_t r0 =
      (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5)) * kRows;
  if (r0 >= rows) return;
  const int nr = static_cast<int>(rows - r0 < kRows ? rows - r0 : kRows);
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * kBatchTile;
  const int nb = static_cast<int>(batch - b0 < kBatchTile ? batch - b0 : kBatchTile);
  float acc[kRows][kBatchTile];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
#pragma unroll
    for (int b = 0; b < kBatchTile; ++b) acc[i][b] = 0.f;
  }
  // The step at element `at` of each row, a sector per lane.
  auto prefetch = [&](int64_t at) {
    if (at < cols && 32 * lane < kStep) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (i < nr) PrefetchL2(w + (r0 + i) * row_stride + at / 256 * kStep + 32 * lane);
      }
    }
  };
  for (int s = 1; s < ahead; ++s) prefetch(256 * static_cast<int64_t>(s));
  for (int64_t e0 = 8 * lane; e0 < cols; e0 += 256) {
    if (ahead > 0) prefetch(e0 - 8 * lane + 256 * static_cast<int64_t>(ahead));
    float v[kRows][8];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      // A missing last row decodes row r0 again and is never stored.
      Group8<kType>(w + (r0 + (i < nr ? i : 0)) * row_stride, e0, v[i]);
    }
#pragma unroll
    for (int b = 0; b < kBatchTile; ++b) {
      if (b < nb) {
        const float4* xb = reinterpret_cast<const float4*>(x + (b0 + b) * x_stride + e0);
        const float4 lo = xb[0], hi = xb[1];
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
          acc[i][b] += v[i][0] * lo.x + v[i][1] * lo.y + v[i][2] * lo.z + v[i][3] * lo.w +
                       v[i][4] * hi.x + v[i][5] * hi.y + v[i][6] * hi.z + v[i][7] * hi.w;
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
#pragma unroll
    for (int b = 0; b < kBatchTile; ++b) {
      float sum = acc[i][b];
      for (int offset = 16; offset > 0; offset >>= 1) {
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
      }
      if (lane == 0 && b < nb && i < nr) y[(b0 + b) * y_stride + r0 + i] = sum;
    }
  }
}

template <uint32_t kType>
__global__ void MatMulKernel(int64_t rows, int64_t cols, const uint8_t* __restrict__ w,
                             int64_t row_stride, const float* __restrict__ x, int64_t x_stride,
                             int64_t batch, float* __restrict__ y, int64_t y_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * kBatchTile;
  const int nb = static_cast<int>(batch - b0 < kBatchTile ? batch - b0 : kBatchTile);
  const uint8_t* row = w + r * row_stride;
  float acc[kBatchTile];
#pragma unroll
  for (int b = 0; b < kBatchTile; ++b) acc[b] = 0.f;
  for (int64_t e = lane; e < cols; e += 32) {
    const float v = Element<kType>(row, e);
#pragma unroll
    for (int b = 0; b < kBatchTile; ++b) {
      if (b < nb) acc[b] += v * x[(b0 + b) * x_stride + e];
    }
  }
#pragma unroll
  for (int b = 0; b < kBatchTile; ++b) {
    float sum = acc[b];
    for (int offset = 16; offset > 0; offset >>= 1) {
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0 && b < nb) y[(b0 + b) * y_stride + r] = sum;
  }
}

// Whether the block types use the per-element kernel: WASTE_CUDA_ELEMENTWISE
// set and not "0" (the plain first kernel, kept to compare against; read at
// each launch, which costs far less than the launch).
bool Elementwise() {
  const char* v = std::getenv("WASTE_CUDA_ELEMENTWISE");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// An integer setting from the environment, or `otherwise`.
int EnvInt(const char* name, int otherwise) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : otherwise;
}

// The grouped kernel: RowsPerWarp1 rows per warp for a single vector
// (WASTE_CUDA_ROWS1=1, 2 or 4 instead); four for a batch, whose activations
// then serve four rows. WASTE_CUDA_PREFETCH: the steps MatMulGroupKernel
// asks L2 for ahead (0: none; kPrefetchSteps unset).
template <uint32_t kGroupType>
void LaunchGrouped(int64_t rows, int64_t cols, const uint8_t* w, int64_t row_stride, const float* x,
                   int64_t x_stride, int64_t batch, float* y, int64_t y_stride,
                   cudaStream_t stream) {
  // Read once per kernel type, not at each of a token's ~225 launches (the
  // device check's `variants` part sets them per process).
  static const int ahead = EnvInt("WASTE_CUDA_PREFETCH", kPrefetchSteps);
  static const int rows1 = EnvInt("WASTE_CUDA_ROWS1", RowsPerWarp1(kGroupType));
  const unsigned batch_tiles = static_cast<unsigned>((batch + kBatchTile - 1) / kBatchTile);
  auto launch = [&](auto rows_per_warp) {
    constexpr int kRows = decltype(rows_per_warp)::value;
    const dim3 grid(
        static_cast<unsigned>((rows + kWarpsPerBlock * kRows - 1) / (kWarpsPerBlock * kRows)),
        batch_tiles);
    MatMulGroupKernel<kGroupType, kRows><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(
        rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, ahead);
  };
  if (batch > 1) return launch(std::integral_constant<int, 4>());
  switch (rows1) {
    case 1:
      return launch(std::integral_constant<int, 1>());
    case 2:
      return launch(std::integral_constant<int, 2>());
    case 4:
      return launch(std::integral_constant<int, 4>());
    default:
      return launch(std::integral_constant<int, 2>());
  }
}

template <uint32_t kType>
int Launch(int64_t rows, int64_t cols, uint64_t w, int64_t row_stride, uint64_t x, int64_t x_stride,
           int64_t batch, uint64_t y, int64_t y_stride, cudaStream_t stream) {
  constexpr bool kGrouped = kType != kF32;
  // F16 and BF16 rows are read 16 bytes at a time.
  constexpr bool kHalves = kType == kF16 || kType == kBF16;
  const auto* wp = reinterpret_cast<const uint8_t*>(w);
  const auto* xp = reinterpret_cast<const float*>(x);
  auto* yp = reinterpret_cast<float*>(y);
  if constexpr (kGrouped) {
    const bool halves_fit = !kHalves || (w % 16 == 0 && row_stride % 16 == 0 && cols % 8 == 0);
    if (!Elementwise() && halves_fit && x % 16 == 0 && (batch == 1 || x_stride % 4 == 0)) {
      constexpr bool kWords = kType == kQ4_K || kType == kQ5_K;
      if (kWords && w % 16 == 0 && row_stride % 16 == 0) {
        LaunchGrouped<kWords ? 1000 + kType : kType>(rows, cols, wp, row_stride, xp, x_stride,
                                                     batch, yp, y_stride, stream);
      } else {
        LaunchGrouped<kType>(rows, cols, wp, row_stride, xp, x_stride, batch, yp, y_stride, stream);
      }
      return cudaGetLastError();
    }
  }
  const dim3 grid(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>((batch + kBatchTile - 1) / kBatchTile));
  MatMulKernel<kType><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(rows, cols, wp, row_stride, xp,
                                                                x_stride, batch, yp, y_stride);
  return cudaGetLastError();
}

}  // namespace

int LaunchMatMul(uint32_t type, int64_t rows, int64_t cols, uint64_t w, int64_t row_stride,
                 uint64_t x, int64_t x_stride, int64_t batch, uint64_t y, int64_t y_stride,
                 Handle stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case kF32:
      return Launch<kF32>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kF16:
      return Launch<kF16>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kBF16:
      return Launch<kBF16>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ4_0:
      return Launch<kQ4_0>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ4_1:
      return Launch<kQ4_1>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ5_0:
      return Launch<kQ5_0>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ5_1:
      return Launch<kQ5_1>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ8_0:
      return Launch<kQ8_0>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ4_NL:
      return Launch<kIQ4_NL>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ4_XS:
      return Launch<kIQ4_XS>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ4_K:
      return Launch<kQ4_K>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ5_K:
      return Launch<kQ5_K>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ6_K:
      return Launch<kQ6_K>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace waste::gpu::cuda_api
