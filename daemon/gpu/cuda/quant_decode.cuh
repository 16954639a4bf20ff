// The block types' decoders of the device kernels (quant_matmul.cu): ggml's
// block layouts (daemon/kernels/quant_blocks.h) by byte offsets, an element
// at a time (Element) or eight consecutive ones sharing their sub-block's
// scale (Group8), each value computed in ggml's order of products,
// (d * scale) * code, as the CPU's DequantizeRow. Included by
// quant_matmul.cu only, inside its anonymous namespace.
#ifndef WASTE_DAEMON_GPU_CUDA_QUANT_DECODE_CUH_
#define WASTE_DAEMON_GPU_CUDA_QUANT_DECODE_CUH_

// ggml type ids (kernels::WeightType).
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
                   kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ2_XXS = 16,
                   kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22,
                   kIQ4_XS = 23, kIQ1_M = 29, kBF16 = 30, kMXFP4 = 39;

// The 16 levels of IQ4_NL and IQ4_XS (kernels::kIq4NlValues). In global
// memory, not __constant__: a warp's lanes look up different levels, which
// the constant cache serves one address at a time and L1 at once.
__device__ const int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4's doubled E2M1 values (kernels::kMxfp4Values), the same way.
__device__ const int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

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

// MXFP4's scale: 2^(e - 128) from its E8M0 byte (kernels' E8M0HalfToF32):
// below e = 2 the subnormal 2^-128 or 2^-127.
__device__ __forceinline__ float E8M0Half(uint32_t e) {
  return __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

// BlockMXFP4: e (E8M0), qs[16] nibbles as Q4_0; x = 2^(e - 128) * kMxfp4Values[q].
template <>
__device__ __forceinline__ float Element<kMXFP4>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 5) * 17;
  return E8M0Half(b[0]) * static_cast<float>(kMxfp4Values[Nibble(b + 1, static_cast<int>(e & 31))]);
}

// BlockQ2_K: scales[16] (low nibble scale, high nibble min), qs[64], d,
// dmin. Element i: half h = i/128, shift 2j with j = (i%128)/32, l = i%32:
// code (qs[32h + l] >> 2j) & 3, sub-block s = 8h + 2j + l/16;
// x = (d * (scales[s] & 15)) * code - dmin * (scales[s] >> 4).
__device__ __forceinline__ void Q2KPlace(int i, int* q_byte, int* shift, int* sub) {
  const int h = i >> 7, j = (i & 127) >> 5, l = i & 31;
  *q_byte = 32 * h + l;
  *shift = 2 * j;
  *sub = 8 * h + 2 * j + (l >> 4);
}

template <>
__device__ __forceinline__ float Element<kQ2_K>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 8) * 84;
  int q_byte, shift, sub;
  Q2KPlace(static_cast<int>(e & 255), &q_byte, &shift, &sub);
  const int sc = b[sub];
  return (HalfAt(b + 80) * (sc & 0xF)) * static_cast<float>((b[16 + q_byte] >> shift) & 3) -
         HalfAt(b + 82) * (sc >> 4);
}

// BlockQ3_K: hmask[32], qs[64], scales[12] (16 6-bit scales), d. Element
// i, placed as in Q2_K: low bits (qs[32h + l] >> 2j) & 3, less 4 unless
// bit 4h + j of hmask[l]; scale s: low 4 bits from nibble s / 8 of
// scales[s % 8], high 2 from bits 2 (s / 4) of scales[8 + s % 4];
// x = (d * (scale - 32)) * code.
__device__ __forceinline__ int Q3KScale(const uint8_t* scales, int s) {
  const int low = (scales[s & 7] >> (4 * (s >> 3))) & 0xF;
  const int high = (scales[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
  return (low | (high << 4)) - 32;
}

template <>
__device__ __forceinline__ float Element<kQ3_K>(const uint8_t* row, int64_t e) {
  const uint8_t* b = row + (e >> 8) * 110;
  const int i = static_cast<int>(e & 255);
  int q_byte, shift, sub;
  Q2KPlace(i, &q_byte, &shift, &sub);
  const int high_bit = 4 * (i >> 7) + (shift >> 1);
  const int q = ((b[32 + q_byte] >> shift) & 3) - ((b[i & 31] >> high_bit) & 1 ? 0 : 4);
  return (HalfAt(b + 108) * Q3KScale(b + 96, sub)) * static_cast<float>(q);
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

template <>
__device__ __forceinline__ void Group8<kMXFP4>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 5) * 17;
  const float d = E8M0Half(b[0]);
  int q[8];
  Nibbles8(b + 1, static_cast<int>(e0 & 31), q);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = d * static_cast<float>(kMxfp4Values[q[k]]);
}

// Q2_K and Q3_K: a group of 8 lies in one 16-element sub-block, its codes
// in 8 consecutive bytes of qs at one shift.
template <>
__device__ __forceinline__ void Group8<kQ2_K>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 8) * 84;
  int q_byte, shift, sub;
  Q2KPlace(static_cast<int>(e0 & 255), &q_byte, &shift, &sub);
  const int sc = b[sub];
  const float dl = HalfAt(b + 80) * (sc & 0xF), ml = HalfAt(b + 82) * (sc >> 4);
  const uint8_t* qs = b + 16 + q_byte;
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = dl * static_cast<float>((qs[k] >> shift) & 3) - ml;
}

template <>
__device__ __forceinline__ void Group8<kQ3_K>(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 8) * 110;
  const int i0 = static_cast<int>(e0 & 255);
  int q_byte, shift, sub;
  Q2KPlace(i0, &q_byte, &shift, &sub);
  const float dl = HalfAt(b + 108) * Q3KScale(b + 96, sub);
  const int high_bit = 4 * (i0 >> 7) + (shift >> 1);
  const uint8_t* qs = b + 32 + q_byte;
  const uint8_t* hmask = b + (i0 & 31);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int q = ((qs[k] >> shift) & 3) - ((hmask[k] >> high_bit) & 1 ? 0 : 4);
    v[k] = dl * static_cast<float>(q);
  }
}

// The codebook types (IQ1_S .. IQ3_S): elements 8l .. 8l + 7 of group g
// (32 elements) are one 64-bit word of int8 codes, as kernels/iq_decode.h
// builds them, times the scale of their half of the group: g_iq's tables,
// each word's bytes element j in byte j.
__device__ IqTables g_iq;

__device__ __forceinline__ uint16_t U16At(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
__device__ __forceinline__ uint32_t U32At(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
// Negates the bytes of `grid` (all in 1..127) whose bit is set in `signs`.
__device__ __forceinline__ uint64_t WithSigns(uint64_t grid, uint32_t signs) {
  const uint64_t m = g_iq.sign_bytes[signs];
  return (grid ^ m) + (m & 0x0101010101010101ull);
}
// IQ1: grid bytes -1, 0, 1 to 8 * grid + (negative ? -1 : 1).
__device__ __forceinline__ uint64_t Iq1Codes(uint64_t grid, bool negative) {
  const uint64_t eight = (grid & 0x1F1F1F1F1F1F1F1Full) << 3;
  if (!negative) return eight | 0x0101010101010101ull;
  return ~(eight ^ ((grid & 0x0101010101010101ull) * 0xF0));
}

// Word l of group g of the block at b, and its scale (per 16 elements: l / 2).
template <uint32_t kType>
__device__ __forceinline__ uint64_t IqWord(const uint8_t* b, int g, int l, float* scale);

template <>
__device__ __forceinline__ uint64_t IqWord<kIQ2_XXS>(const uint8_t* b, int g, int l, float* scale) {
  const uint8_t* qs = b + 2 + 8 * g;  // 4 grid indices, then the word of signs and scale.
  const uint32_t aux = U32At(qs + 4);
  *scale = HalfAt(b) * static_cast<float>(2 * (aux >> 28) + 1) * 0.125f;
  return WithSigns(g_iq.iq2xxs[qs[l]], g_iq.signs7[(aux >> (7 * l)) & 127]);
}

// IQ2_XS and IQ2_S: two 4-bit scales in scales[g], one per 16.
__device__ __forceinline__ float Iq2Scale(const uint8_t* b, int sc, int l) {
  return HalfAt(b) * static_cast<float>(2 * ((sc >> (4 * (l >> 1))) & 0xF) + 1) * 0.125f;
}

template <>
__device__ __forceinline__ uint64_t IqWord<kIQ2_XS>(const uint8_t* b, int g, int l, float* scale) {
  const uint32_t v = U16At(b + 2 + 8 * g + 2 * l);  // 9-bit index, 7-bit sign index.
  *scale = Iq2Scale(b, b[66 + g], l);
  return WithSigns(g_iq.iq2xs[v & 511], g_iq.signs7[v >> 9]);
}

template <>
__device__ __forceinline__ uint64_t IqWord<kIQ2_S>(const uint8_t* b, int g, int l, float* scale) {
  // qs[0..31] index bytes, qs[32..63] sign bytes, qh[8], scales[8].
  const int index = b[2 + 4 * g + l] | ((b[66 + g] << (8 - 2 * l)) & 0x300);
  *scale = Iq2Scale(b, b[74 + g], l);
  return WithSigns(g_iq.iq2s[index], b[2 + 32 + 4 * g + l]);
}

template <>
__device__ __forceinline__ uint64_t IqWord<kIQ3_XXS>(const uint8_t* b, int g, int l, float* scale) {
  const uint8_t* qs = b + 2 + 8 * g;  // Two 4-value indices per word.
  const uint32_t aux = U32At(b + 2 + 64 + 4 * g);
  *scale = HalfAt(b) * static_cast<float>(2 * (aux >> 28) + 1) * 0.25f;
  const uint64_t grid = g_iq.iq3xxs[qs[2 * l]] | (uint64_t{g_iq.iq3xxs[qs[2 * l + 1]]} << 32);
  return WithSigns(grid, g_iq.signs7[(aux >> (7 * l)) & 127]);
}

template <>
__device__ __forceinline__ uint64_t IqWord<kIQ3_S>(const uint8_t* b, int g, int l, float* scale) {
  // qs[64], qh[8], signs[32], scales[4].
  const uint8_t* qs = b + 2 + 8 * g;
  const int qh = b[66 + g];
  const int i0 = qs[2 * l] | ((qh << (8 - 2 * l)) & 256);
  const int i1 = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
  *scale = HalfAt(b) * static_cast<float>(2 * ((b[106 + g / 2] >> (4 * (g % 2))) & 0xF) + 1);
  return WithSigns(g_iq.iq3s[i0] | (uint64_t{g_iq.iq3s[i1]} << 32), b[74 + 4 * g + l]);
}

template <>
__device__ __forceinline__ uint64_t IqWord<kIQ1_S>(const uint8_t* b, int g, int l, float* scale) {
  // qs[32], then qh[8] (u16): index bits 8-10 at 3l, scale bits 12-14, sign bit 15.
  const uint32_t qh = U16At(b + 34 + 2 * g);
  *scale = HalfAt(b) * static_cast<float>(2 * ((qh >> 12) & 7) + 1) * 0.125f;
  return Iq1Codes(g_iq.iq1s[b[2 + 4 * g + l] | (((qh >> (3 * l)) & 7) << 8)], qh & 0x8000);
}

template <>
__device__ __forceinline__ uint64_t IqWord<kIQ1_M>(const uint8_t* b, int g, int l, float* scale) {
  // qs[32], qh[16] (a nibble per word: index bits 8-10, the shift's sign),
  // scales: 4 u16 words of 3-bit scales per 16, their top nibbles the f16 d.
  uint32_t sc[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) sc[i] = U16At(b + 48 + 2 * i);
  const uint32_t h =
      (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000);
  const int nibble = (b[32 + 2 * g + l / 2] >> (4 * (l % 2))) & 0xF;
  const int word = sc[g / 2] >> (6 * (g % 2));
  *scale = HalfBits(h) * static_cast<float>(2 * ((word >> (3 * (l >> 1))) & 7) + 1) * 0.125f;
  return Iq1Codes(g_iq.iq1s[b[4 * g + l] | ((nibble & 7) << 8)], nibble & 8);
}

// Bytes of one IQ block of 256 elements.
__host__ __device__ constexpr int IqBlockBytes(uint32_t type) {
  switch (type) {
    case kIQ2_XXS:
      return 66;
    case kIQ2_XS:
      return 74;
    case kIQ2_S:
      return 82;
    case kIQ3_XXS:
      return 98;
    case kIQ3_S:
      return 110;
    case kIQ1_S:
      return 50;
    case kIQ1_M:
      return 56;
    default:
      return 0;
  }
}

template <uint32_t kType>
__device__ __forceinline__ void IqGroup8(const uint8_t* row, int64_t e0, float v[8]) {
  const uint8_t* b = row + (e0 >> 8) * IqBlockBytes(kType);
  const int i0 = static_cast<int>(e0 & 255);
  float scale;
  const uint64_t word = IqWord<kType>(b, i0 >> 5, (i0 >> 3) & 3, &scale);
#pragma unroll
  for (int k = 0; k < 8; ++k)
    v[k] = scale * static_cast<float>(static_cast<int8_t>(word >> (8 * k)));
}

#define WASTE_IQ_DECODERS(T)                                                              \
  template <>                                                                             \
  __device__ __forceinline__ void Group8<T>(const uint8_t* row, int64_t e0, float v[8]) { \
    IqGroup8<T>(row, e0, v);                                                              \
  }                                                                                       \
  template <>                                                                             \
  __device__ __forceinline__ float Element<T>(const uint8_t* row, int64_t e) {            \
    float v[8];                                                                           \
    IqGroup8<T>(row, e & ~int64_t{7}, v);                                                 \
    return v[e & 7];                                                                      \
  }
WASTE_IQ_DECODERS(kIQ2_XXS)
WASTE_IQ_DECODERS(kIQ2_XS)
WASTE_IQ_DECODERS(kIQ2_S)
WASTE_IQ_DECODERS(kIQ3_XXS)
WASTE_IQ_DECODERS(kIQ3_S)
WASTE_IQ_DECODERS(kIQ1_S)
WASTE_IQ_DECODERS(kIQ1_M)
#undef WASTE_IQ_DECODERS

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
    case kMXFP4:  // 8 blocks of 17.
      return 136;
    case kQ2_K:
      return 84;
    case kQ3_K:
      return 110;
    case kIQ2_XXS:
    case kIQ2_XS:
    case kIQ2_S:
    case kIQ3_XXS:
    case kIQ3_S:
    case kIQ1_S:
    case kIQ1_M:
      return IqBlockBytes(type);
    case kF16:
    case kBF16:
      return 512;
    default:
      return 0;
  }
}

#endif  // WASTE_DAEMON_GPU_CUDA_QUANT_DECODE_CUH_
