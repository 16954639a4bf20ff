// Conversions between f32 and the 16-bit float formats of GGUF tensors:
// IEEE binary16 (F16, ggml_half) and bfloat16 (BF16).
//
// Exact in the f16/bf16 -> f32 direction; f32 -> f16/bf16 round to nearest
// even, NaN stays NaN, overflow goes to infinity (as F16C's vcvtps2ph and
// ggml's reference do).
//
// These inline functions are compiled into translation units built with
// different ISA flags (matvec_avx2.cc has -mf16c, the scalar files do not).
// The inline namespace differs per flag set so that the linker never merges
// an F16C-using copy into code that must run without F16C.
#ifndef WASTE_DAEMON_KERNELS_FP16_H_
#define WASTE_DAEMON_KERNELS_FP16_H_

#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#define WASTE_FP16_NS f16c
#else
#define WASTE_FP16_NS portable
#endif

namespace waste::kernels {
inline namespace WASTE_FP16_NS {

inline float BitsToF32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint32_t F32ToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// MXFP4's E8M0 block exponent as ggml's GGML_E8M0_TO_FP32_HALF reads it:
// 2^(e - 128), i.e. the scale 2^(e - 127) halved. e = 0 and 1 are the
// subnormals 2^-128 and 2^-127; e = 255 is 2^127 (ggml has no NaN here).
inline float E8M0HalfToF32(uint8_t e) {
  return BitsToF32(e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23);
}

inline float F16ToF32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  // Scale the exponent through a float multiply so subnormals come out right
  // without a branch per case (the classic approach of FP16 libraries).
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  constexpr uint32_t kExpOffset = 0xE0u << 23;
  const float normalized = BitsToF32((two_w >> 4) + kExpOffset) * 0x1.0p-112f;
  constexpr uint32_t kMagic = 126u << 23;
  const float denormalized = BitsToF32((two_w >> 17) | kMagic) - 0.5f;
  constexpr uint32_t kDenormCutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < kDenormCutoff ? F32ToBits(denormalized) : F32ToBits(normalized));
  return BitsToF32(result);
#endif
}

inline uint16_t F32ToF16(float f) {
#if defined(__F16C__)
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
  // Round to nearest even by letting the FPU do it on a rescaled value.
  float base = (f < 0 ? -f : f) * 0x1.0p+112f;
  base *= 0x1.0p-110f;
  const uint32_t w = F32ToBits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = BitsToF32((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = F32ToBits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
#endif
}

inline float Bf16ToF32(uint16_t h) { return BitsToF32(static_cast<uint32_t>(h) << 16); }

inline uint16_t F32ToBf16(float f) {
  const uint32_t bits = F32ToBits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // Quiet the NaN.
  }
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1)) >> 16);
}

}  // namespace WASTE_FP16_NS
}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_FP16_H_
