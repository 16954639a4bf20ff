#include "daemon/kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/logging.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/quant_pack.h"
#include "daemon/kernels/quantize_iq.h"

namespace waste::kernels {
namespace {

using internal::PackFiveBits;
using internal::PackKNibbles;
using internal::PackNibbles;

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

// Least-squares fit of x ~= scale * q + offset over n elements with q in
// [0, levels] and offset <= 0 (the K-quants store the offset as a
// non-negative min that is subtracted). Starts from the range and alternates
// rounding and refitting a few times, keeping the best; returns the scale and
// -offset.
void FitAffine(const float* x, int n, int levels, float* scale_out, float* min_out) {
  float lo = std::min(0.0f, *std::min_element(x, x + n));
  const float hi = *std::max_element(x, x + n);
  float scale = (hi - lo) / levels;
  float best_err = -1;
  *scale_out = scale;
  *min_out = -lo;
  if (scale <= 0) return;
  for (int iter = 0; iter < 6 && scale > 0; ++iter) {
    double sq = 0, sqq = 0, sx = 0, sxq = 0, err = 0;
    int q[kQK_K];
    for (int i = 0; i < n; ++i) {
      q[i] = RoundClamp((x[i] - lo) / scale, 0, levels);
      const float e = scale * q[i] + lo - x[i];
      err += e * e;
      sq += q[i], sqq += q[i] * q[i], sx += x[i], sxq += x[i] * q[i];
    }
    if (best_err < 0 || err < best_err) {
      best_err = err;
      *scale_out = scale;
      *min_out = -lo;
    }
    // Refit scale and offset to these codes.
    const double det = n * sqq - sq * sq;
    if (det <= 0) break;
    double a = (n * sxq - sq * sx) / det;
    double b = (sx - a * sq) / n;
    if (b > 0) b = 0, a = sqq > 0 ? sxq / sqq : 0;
    scale = static_cast<float>(a);
    lo = static_cast<float>(b);
  }
}

// Least-squares refit of a symmetric scale to fixed codes (x ~= s * q).
float RefitScale(const float* x, const int* q, int n, float fallback) {
  double sxq = 0, sqq = 0;
  for (int i = 0; i < n; ++i) sxq += x[i] * q[i], sqq += q[i] * q[i];
  return sqq > 0 ? static_cast<float>(sxq / sqq) : fallback;
}

void QuantizeQ2_K(const float* x, BlockQ2_K* b) {
  float sub_scale[16], sub_min[16];
  for (int k = 0; k < 16; ++k) FitAffine(x + 16 * k, 16, 3, &sub_scale[k], &sub_min[k]);
  const float max_scale = *std::max_element(sub_scale, sub_scale + 16);
  const float max_min = *std::max_element(sub_min, sub_min + 16);
  const Half d_h = F32ToF16(max_scale / 15);
  const Half dmin_h = F32ToF16(max_min / 15);
  const float d = F16ToF32(d_h), dmin = F16ToF32(dmin_h);
  std::memset(b->qs, 0, sizeof(b->qs));
  for (int k = 0; k < 16; ++k) {
    const int sc = d > 0 ? RoundClamp(sub_scale[k] / d, 0, 15) : 0;
    const int m = dmin > 0 ? RoundClamp(sub_min[k] / dmin, 0, 15) : 0;
    b->scales[k] = static_cast<uint8_t>(sc | (m << 4));
    const float step = d * sc, offset = dmin * m;
    const int g = k / 2;
    for (int l = 0; l < 16; ++l) {
      const int q = step > 0 ? RoundClamp((x[16 * k + l] + offset) / step, 0, 3) : 0;
      b->qs[32 * (g / 4) + 16 * (k % 2) + l] |= static_cast<uint8_t>(q << (2 * (g % 4)));
    }
  }
  b->d = d_h;
  b->dmin = dmin_h;
}

// Codes q in [-4, 3] of x against `step` (0: all zero).
void RoundSymmetric3(const float* x, int n, float step, int* q) {
  for (int i = 0; i < n; ++i) q[i] = step != 0 ? RoundClamp(x[i] / step, -4, 3) : 0;
}

void QuantizeQ3_K(const float* x, BlockQ3_K* b) {
  // Per 16: the largest magnitude maps to -4 (the one level without a
  // positive twin), then the scale is refit to the rounded codes.
  float sub_scale[16];
  int q[kQK_K];
  for (int k = 0; k < 16; ++k) {
    const float s = SignedAbsMax(x + 16 * k, 16) / -4;
    RoundSymmetric3(x + 16 * k, 16, s, q + 16 * k);
    sub_scale[k] = RefitScale(x + 16 * k, q + 16 * k, 16, s);
  }
  const float d = SignedAbsMax(sub_scale, 16) / -32;
  const Half d_h = F32ToF16(d);
  const float dq = F16ToF32(d_h);
  int sc[16];
  for (int k = 0; k < 16; ++k) {
    sc[k] = dq != 0 ? RoundClamp(sub_scale[k] / dq, -32, 31) : 0;
    RoundSymmetric3(x + 16 * k, 16, dq * sc[k], q + 16 * k);
  }
  std::memset(b->scales, 0, sizeof(b->scales));
  for (int k = 0; k < 16; ++k) {
    const int v = sc[k] + 32;
    b->scales[k % 8] |= static_cast<uint8_t>((v & 0xF) << (4 * (k / 8)));
    b->scales[8 + k % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (k / 4)));
  }
  std::memset(b->qs, 0, sizeof(b->qs));
  std::memset(b->hmask, 0, sizeof(b->hmask));
  for (int g = 0; g < 8; ++g) {
    for (int l = 0; l < 32; ++l) {
      const int code = q[32 * g + l] + 4;
      b->qs[32 * (g / 4) + l] |= static_cast<uint8_t>((code & 3) << (2 * (g % 4)));
      b->hmask[l] |= static_cast<uint8_t>((code >> 2) << g);
    }
  }
  b->d = d_h;
}

// Index of the IQ4_NL level nearest to v (levels ascending).
int NearestIq4(float v) {
  int lo = 0;
  for (int step = 8; step > 0; step /= 2) {
    if (lo + step < 16 && kIq4NlValues[lo + step] <= v) lo += step;
  }
  if (lo < 15 && v - kIq4NlValues[lo] > kIq4NlValues[lo + 1] - v) ++lo;
  return lo;
}

// IQ4 codes of n elements against scale d; returns the squared error.
double RoundIq4(const float* x, int n, float d, int* idx) {
  double err = 0;
  const float id = d != 0 ? 1 / d : 0;
  for (int i = 0; i < n; ++i) {
    idx[i] = NearestIq4(x[i] * id);
    const float e = d * kIq4NlValues[idx[i]] - x[i];
    err += e * e;
  }
  return err;
}

// A scale for x ~= d * kIq4NlValues[q] over 32 elements: tries the largest
// magnitude on either end level and a few points between, refitting each to
// its codes by least squares; returns the one of least squared error.
float SearchIq4Scale(const float* x) {
  const float amax = SignedAbsMax(x, kQK32);
  if (amax == 0) return 0;
  int idx[kQK32];
  float best_d = amax / -127;
  double best_err = RoundIq4(x, kQK32, best_d, idx);
  for (int t = -8; t <= 8; ++t) {
    for (float end : {-127.0f, 113.0f}) {
      float d = amax / (end + (end < 0 ? t : t / 2.0f));
      RoundIq4(x, kQK32, d, idx);
      double sxq = 0, sqq = 0;
      for (int i = 0; i < kQK32; ++i) {
        sxq += x[i] * kIq4NlValues[idx[i]];
        sqq += kIq4NlValues[idx[i]] * kIq4NlValues[idx[i]];
      }
      if (sqq > 0) d = static_cast<float>(sxq / sqq);
      const double err = RoundIq4(x, kQK32, d, idx);
      if (err < best_err) best_err = err, best_d = d;
    }
  }
  return best_d;
}

void QuantizeIQ4_XS(const float* x, BlockIQ4_XS* b) {
  float sub_scale[8];
  for (int g = 0; g < 8; ++g) sub_scale[g] = SearchIq4Scale(x + 32 * g);
  const Half d_h = F32ToF16(SignedAbsMax(sub_scale, 8) / -32);
  const float d = F16ToF32(d_h);
  b->d = d_h;
  b->scales_h = 0;
  std::memset(b->scales_l, 0, sizeof(b->scales_l));
  int idx[kQK32];
  for (int g = 0; g < 8; ++g) {
    const int ls = d != 0 ? RoundClamp(sub_scale[g] / d, -32, 31) : 0;
    b->scales_l[g / 2] |= static_cast<uint8_t>(((ls + 32) & 0xF) << (4 * (g % 2)));
    b->scales_h |= static_cast<uint16_t>(((ls + 32) >> 4) << (2 * g));
    RoundIq4(x + 32 * g, kQK32, d * ls, idx);
    PackNibbles(idx, b->qs + 16 * g);
  }
}

// As ggml's quantize_row_mxfp4_ref: the exponent puts the largest
// magnitude at 8..16 times the scale 2^(e - 128) (so the top level, 12, may
// clip it by up to a third), then each element takes the nearest level, the
// first of equals (so zero is code 0, never the -0 of code 8).
void QuantizeMXFP4(const float* x, BlockMXFP4* b) {
  float amax = 0;
  for (int j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(x[j]));
  // ggml casts without a clamp (undefined past 0..255); no real weight is
  // that far from 1.
  const int e =
      amax > 0 ? std::clamp(static_cast<int>(std::floor(std::log2(amax))) + 125, 0, 255) : 0;
  b->e = static_cast<uint8_t>(e);
  const float d = E8M0HalfToF32(b->e);
  int idx[kQK32];
  for (int j = 0; j < kQK32; ++j) {
    int best = 0;
    float best_err = std::fabs(kMxfp4Values[0] * d - x[j]);
    for (int i = 1; i < 16; ++i) {
      const float err = std::fabs(kMxfp4Values[i] * d - x[j]);
      if (err < best_err) best = i, best_err = err;
    }
    idx[j] = best;
  }
  PackNibbles(idx, b->qs);
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
        PackFiveBits(q, b->qh, b->qs);
      }
      return;
    case WeightType::kQ5_1:
      for (int64_t i = 0; i < nb; ++i) {
        auto* b = static_cast<BlockQ5_1*>(dst) + i;
        float d, m;
        QuantizeAffine32(src + kQK32 * i, 5, &d, &m, q);
        b->d = F32ToF16(d);
        b->m = F32ToF16(m);
        PackFiveBits(q, b->qh, b->qs);
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
    case WeightType::kQ2_K:
      for (int64_t i = 0; i < nb; ++i) {
        QuantizeQ2_K(src + kQK_K * i, static_cast<BlockQ2_K*>(dst) + i);
      }
      return;
    case WeightType::kQ3_K:
      for (int64_t i = 0; i < nb; ++i) {
        QuantizeQ3_K(src + kQK_K * i, static_cast<BlockQ3_K*>(dst) + i);
      }
      return;
    case WeightType::kIQ4_NL:
      for (int64_t i = 0; i < nb; ++i) {
        auto* b = static_cast<BlockIQ4_NL*>(dst) + i;
        const float* x = src + kQK32 * i;
        b->d = F32ToF16(SearchIq4Scale(x));
        RoundIq4(x, kQK32, F16ToF32(b->d), q);
        PackNibbles(q, b->qs);
      }
      return;
    case WeightType::kIQ4_XS:
      for (int64_t i = 0; i < nb; ++i) {
        QuantizeIQ4_XS(src + kQK_K * i, static_cast<BlockIQ4_XS*>(dst) + i);
      }
      return;
    case WeightType::kMXFP4:
      for (int64_t i = 0; i < nb; ++i) {
        QuantizeMXFP4(src + kQK32 * i, static_cast<BlockMXFP4*>(dst) + i);
      }
      return;
    case WeightType::kIQ2_XXS:
    case WeightType::kIQ2_XS:
    case WeightType::kIQ2_S:
    case WeightType::kIQ3_XXS:
    case WeightType::kIQ3_S:
    case WeightType::kIQ1_S:
    case WeightType::kIQ1_M:
      return internal::QuantizeGridRow(type, src, dst, n);
  }
  WCHECK(false) << "unhandled weight type " << static_cast<uint32_t>(type);
}

size_t ActsScratchBytes(int64_t cols) {
  const size_t units = static_cast<size_t>(cols + 255) / 256;
  return Align64(cols) + 2 * Align64(cols / 32 * sizeof(float)) +
         Align64(cols / 16 * sizeof(float)) + 256 * units + Align64(units * 32 * sizeof(float)) +
         Align64(std::max<size_t>(cols / 16, 8 * units) * sizeof(int32_t));
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
  const size_t units = static_cast<size_t>(cols + 255) / 256;
  a.qp = reinterpret_cast<int8_t*>(p);
  p += 256 * units;
  a.ds = reinterpret_cast<float*>(p);
  p += Align64(units * 32 * sizeof(float));
  a.zs = reinterpret_cast<int32_t*>(p);
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
