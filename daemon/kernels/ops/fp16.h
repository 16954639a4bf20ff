// IEEE 754 binary16 <-> binary32 conversion.
//
// The scalar functions here are bit-exact with x86 F16C (`vcvtph2ps`,
// `vcvtps2ph` with round-to-nearest-even): subnormals are kept, overflow
// rounds to infinity, NaNs stay NaN with the quiet bit set and the top
// payload bits carried over. The row functions dispatch per ISA.
//
// Thread-safety: pure functions.
#ifndef WASTE_DAEMON_KERNELS_OPS_FP16_H_
#define WASTE_DAEMON_KERNELS_OPS_FP16_H_

#include <cstdint>
#include <cstring>

#include "daemon/kernels/ops/isa.h"

namespace waste::kernels::ops {

// Raw binary16 bits; the KV cache and GGUF F16 tensors store these.
using Half = uint16_t;

inline float HalfToFloat(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    // Inf stays Inf; NaN is quieted the way F16C does.
    bits = sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalise. Value = mant * 2^-24.
    int e = 113;  // Biased f32 exponent of 2^-14.
    uint32_t m = mant;
    while ((m & 0x400u) == 0) {
      m <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline Half FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN.
    if (abs == 0x7f800000u) return static_cast<Half>(sign | 0x7c00u);
    return static_cast<Half>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x477ff000u) {  // >= 65520: rounds to infinity.
    return static_cast<Half>(sign | 0x7c00u);
  }
  if (abs >= 0x38800000u) {  // >= 2^-14: normal half.
    // Rebias the exponent, then round the 13 dropped bits to nearest even;
    // a carry out of the mantissa correctly bumps the exponent.
    const uint32_t rebased = abs - (112u << 23);
    const uint32_t lsb = (rebased >> 13) & 1u;
    return static_cast<Half>(sign | ((rebased + 0xfffu + lsb) >> 13));
  }
  if (abs < 0x33000000u) {  // < 2^-25: rounds to zero (2^-25 itself ties to 0).
    return static_cast<Half>(sign);
  }
  // Subnormal half: value / 2^-24 rounded to nearest even.
  const uint32_t exp = abs >> 23;                       // 102..112
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;  // 24 significant bits.
  const uint32_t shift = 126u - exp;                    // 14..24
  const uint32_t kept = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half_way = 1u << (shift - 1u);
  const uint32_t round = (rem > half_way || (rem == half_way && (kept & 1u))) ? 1u : 0u;
  return static_cast<Half>(sign | (kept + round));
}

// Converts n values; src and dst must not overlap.
void HalfToFloatRow(const Half* src, int64_t n, float* dst, Isa isa = Isa::kAuto);
void FloatToHalfRow(const float* src, int64_t n, Half* dst, Isa isa = Isa::kAuto);

}  // namespace waste::kernels::ops

#endif  // WASTE_DAEMON_KERNELS_OPS_FP16_H_
