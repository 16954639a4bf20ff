#include "daemon/kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/logging.h"
#include "daemon/kernels/fp16.h"

namespace waste::kernels {
namespace {

size_t Align64(size_t n) { return (n + 63) & ~size_t{63}; }

int RoundClamp(float v, int lo, int hi) {
  const int q = static_cast<int>(std::nearbyint(v));
  return std::clamp(q, lo, hi);
}

// The element of largest magnitude, with its sign: symmetric quantizers map it
// to the most negative code so the full range [-2^(b-1), 2^(b-1)-1] is used.
float SignedAbsMax(const float* x, int n) {
  float best = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

// Symmetric b-bit: x = d * (q - 2^(b-1)), q in [0, 2^b - 1].
void QuantizeSymmetric32(const float* x, int bits, float* d_out, int* q) {
  const int half = 1 << (bits - 1);
  const float d = SignedAbsMax(x, kQK32) / -half;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK32; ++j) q[j] = RoundClamp(x[j] * id, -half, half - 1) + half;
  *d_out = d;
}

// Asymmetric b-bit: x = d * q + m, q in [0, 2^b - 1].
void QuantizeAffine32(const float* x, int bits, float* d_out, float* m_out, int* q) {
  const int levels = (1 << bits) - 1;
  const float lo = *std::min_element(x, x + kQK32);
  const float hi = *std::max_element(x, x + kQK32);
  const float d = (hi - lo) / levels;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK32; ++j) q[j] = RoundClamp((x[j] - lo) * id, 0, levels);
  *d_out = d;
  *m_out = lo;
}

void PackNibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

uint32_t HighBits(const int* q) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  return qh;
}

// Q4_K / Q5_K: per sub-block of 32, x = d*sc*q - dmin*m with 6-bit sc, m.
// Writes d, dmin, the packed scales and q (0 .. 2^bits - 1) for 256 elements.
void QuantizeKAffine(const float* x, int bits, Half* d_out, Half* dmin_out, uint8_t* scales,
                     int* q) {
  const int levels = (1 << bits) - 1;
  float sub_scale[8], sub_min[8];
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    // The min is clamped to <= 0 because the format stores it as a
    // non-negative offset subtracted from every element.
    const float lo = std::min(0.0f, *std::min_element(xs, xs + 32));
    const float hi = *std::max_element(xs, xs + 32);
    sub_scale[j] = (hi - lo) / levels;
    sub_min[j] = -lo;
  }
  const float max_scale = *std::max_element(sub_scale, sub_scale + 8);
  const float max_min = *std::max_element(sub_min, sub_min + 8);
  const Half d_h = F32ToF16(max_scale / 63);
  const Half dmin_h = F32ToF16(max_min / 63);
  const float d = F16ToF32(d_h), dmin = F16ToF32(dmin_h);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0 ? RoundClamp(sub_scale[j] / d, 0, 63) : 0;
    m[j] = dmin > 0 ? RoundClamp(sub_min[j] / dmin, 0, 63) : 0;
  }
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] |= sc[j];
      scales[j + 4] |= m[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
  // Requantize against the rounded scales so the stored codes fit them.
  for (int j = 0; j < 8; ++j) {
    const float step = d * sc[j];
    const float offset = dmin * m[j];
    for (int l = 0; l < 32; ++l) {
      q[32 * j + l] = step > 0 ? RoundClamp((x[32 * j + l] + offset) / step, 0, levels) : 0;
    }
  }
  *d_out = d_h;
  *dmin_out = dmin_h;
}

void PackKNibbles(const int* q, uint8_t* qs) {
  for (int pair = 0; pair < 4; ++pair) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * pair + l] =
          static_cast<uint8_t>((q[64 * pair + l] & 0xF) | ((q[64 * pair + 32 + l] & 0xF) << 4));
    }
  }
}

void QuantizeQ6_K(const float* x, BlockQ6_K* b) {
  float sub_scale[16];
  for (int k = 0; k < 16; ++k) sub_scale[k] = SignedAbsMax(x + 16 * k, 16) / -32;
  float max_abs = 0;
  for (float s : sub_scale) max_abs = std::max(max_abs, std::fabs(s));
  const Half d_h = F32ToF16(max_abs / 127);
  const float d = F16ToF32(d_h);
  int q[kQK_K];
  for (int k = 0; k < 16; ++k) {
    b->scales[k] = static_cast<int8_t>(d > 0 ? RoundClamp(sub_scale[k] / d, -127, 127) : 0);
    const float step = d * b->scales[k];
    for (int l = 0; l < 16; ++l) {
      q[16 * k + l] = step != 0 ? RoundClamp(x[16 * k + l] / step, -32, 31) + 32 : 32;
    }
  }
  b->d = d_h;
  std::memset(b->ql, 0, sizeof(b->ql));
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int half = 0; half < 2; ++half) {
    for (int r = 0; r < 4; ++r) {
      for (int l = 0; l < 32; ++l) {
        const int v = q[128 * half + 32 * r + l];
        b->ql[64 * half + l + 32 * (r & 1)] |= static_cast<uint8_t>((v & 0xF) << (4 * (r >> 1)));
        b->qh[32 * half + l] |= static_cast<uint8_t>((v >> 4) << (2 * r));
      }
    }
  }
}

}  // namespace

void QuantizeRow(WeightType type, const float* src, void* dst, int64_t n) {
  const WeightTypeInfo info = GetWeightTypeInfo(type);
  WCHECK(info.block_elems > 0 && n % info.block_elems == 0)
      << info.name << " row of " << n << " elements";
  const int64_t nb = n / info.block_elems;
  int q[kQK_K];
  switch (type) {
    case WeightType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case WeightType::kF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = F32ToF16(src[i]);
      return;
    case WeightType::kBF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = F32ToBf16(src[i]);
      return;
    case WeightType::kQ8_0:
      for (int64_t i = 0; i < nb; ++i) {
        auto* b = static_cast<BlockQ8_0*>(dst) + i;
        const float* x = src + kQK32 * i;
        float amax = 0;
        for (int j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < kQK32; ++j)
          b->qs[j] = static_cast<int8_t>(RoundClamp(x[j] * id, -127, 127));
        b->d = F32ToF16(d);
      }
      return;
    case WeightType::kQ4_0:
      for (int64_t i = 0; i < nb; ++i) {
        auto* b = static_cast<BlockQ4_0*>(dst) + i;
        float d;
        QuantizeSymmetric32(src + kQK32 * i, 4, &d, q);
        b->d = F32ToF16(d);
        PackNibbles(q, b->qs);
      }
      return;
    case WeightType::kQ4_1:
      for (int64_t i = 0; i < nb; ++i) {
        auto* b = static_cast<BlockQ4_1*>(dst) + i;
        float d, m;
        QuantizeAffine32(src + kQK32 * i, 4, &d, &m, q);
        b->d = F32ToF16(d);
        b->m = F32ToF16(m);
        PackNibbles(q, b->qs);
      }
      return;
    case WeightType::kQ5_0:
      for (int64_t i = 0; i < nb; ++i) {
        auto* b = static_cast<BlockQ5_0*>(dst) + i;
        float d;
        QuantizeSymmetric32(src + kQK32 * i, 5, &d, q);
        b->d = F32ToF16(d);
        const uint32_t qh = HighBits(q);
        std::memcpy(b->qh, &qh, 4);
        for (int j = 0; j < kQK32; ++j) q[j] &= 0xF;
        PackNibbles(q, b->qs);
      }
      return;
    case WeightType::kQ5_1:
      for (int64_t i = 0; i < nb; ++i) {
        auto* b = static_cast<BlockQ5_1*>(dst) + i;
        float d, m;
        QuantizeAffine32(src + kQK32 * i, 5, &d, &m, q);
        b->d = F32ToF16(d);
        b->m = F32ToF16(m);
        const uint32_t qh = HighBits(q);
        std::memcpy(b->qh, &qh, 4);
        for (int j = 0; j < kQK32; ++j) q[j] &= 0xF;
        PackNibbles(q, b->qs);
      }
      return;
    case WeightType::kQ4_K:
      for (int64_t i = 0; i < nb; ++i) {
        auto* b = static_cast<BlockQ4_K*>(dst) + i;
        QuantizeKAffine(src + kQK_K * i, 4, &b->d, &b->dmin, b->scales, q);
        PackKNibbles(q, b->qs);
      }
      return;
    case WeightType::kQ5_K:
      for (int64_t i = 0; i < nb; ++i) {
        auto* b = static_cast<BlockQ5_K*>(dst) + i;
        QuantizeKAffine(src + kQK_K * i, 5, &b->d, &b->dmin, b->scales, q);
        std::memset(b->qh, 0, sizeof(b->qh));
        for (int j = 0; j < 8; ++j) {
          for (int l = 0; l < 32; ++l) {
            b->qh[l] |= static_cast<uint8_t>(((q[32 * j + l] >> 4) & 1) << j);
          }
        }
        PackKNibbles(q, b->qs);
      }
      return;
    case WeightType::kQ6_K:
      for (int64_t i = 0; i < nb; ++i) {
        QuantizeQ6_K(src + kQK_K * i, static_cast<BlockQ6_K*>(dst) + i);
      }
      return;
  }
  WCHECK(false) << "unhandled weight type " << static_cast<uint32_t>(type);
}

size_t ActsScratchBytes(int64_t cols) {
  return 2 * Align64(cols) + 2 * Align64(cols / 32 * sizeof(float)) +
         Align64(cols / 16 * sizeof(float)) + Align64(cols / 256 * 16 * sizeof(float));
}

QuantizedActs LayoutActs(void* buf, int64_t cols) {
  auto* p = static_cast<uint8_t*>(buf);
  WCHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0) << "activation scratch not 64-byte aligned";
  QuantizedActs a;
  a.qs = reinterpret_cast<int8_t*>(p);
  p += Align64(cols);
  a.d = reinterpret_cast<float*>(p);
  p += Align64(cols / 32 * sizeof(float));
  a.s32 = reinterpret_cast<float*>(p);
  p += Align64(cols / 32 * sizeof(float));
  a.s16 = reinterpret_cast<float*>(p);
  p += Align64(cols / 16 * sizeof(float));
  a.qp = reinterpret_cast<int8_t*>(p);
  p += Align64(cols);
  a.ds = reinterpret_cast<float*>(p);
  return a;
}

void QuantizeActsRef(const float* x, int64_t cols, const QuantizedActs& out) {
  WCHECK(cols % kQK32 == 0) << "activation of " << cols << " elements";
  for (int64_t b = 0; b < cols / kQK32; ++b) {
    const float* xb = x + kQK32 * b;
    float amax = 0;
    for (int j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 127 / amax : 0.0f;
    int sum[2] = {0, 0};
    for (int j = 0; j < kQK32; ++j) {
      const int v = RoundClamp(xb[j] * id, -127, 127);
      out.qs[kQK32 * b + j] = static_cast<int8_t>(v);
      sum[j / 16] += v;
    }
    out.d[b] = d;
    out.s32[b] = d * (sum[0] + sum[1]);
    out.s16[2 * b] = d * sum[0];
    out.s16[2 * b + 1] = d * sum[1];
  }
}

}  // namespace waste::kernels
