// Importance-weighted quantizers behind QuantizeRowWeighted (quantize.h).
//
// Every element i of a 256-block gets a weight
//   w_i = importance_i * sqrt(sigma2 + x_i^2),  sigma2 = 2 * mean(x^2),
// (ggml's choice for its K-quants: the activation importance, leaning a
// little towards the weights of large magnitude), and every choice below
// minimizes sum_i w_i (x_i - y_i)^2, y the dequantized value:
//   1. per sub-block, a grid of candidate inverse scales around the range;
//      each candidate's codes are rounded, then the scale (and the offset of
//      the affine types) refit to those codes by weighted least squares;
//      the candidate of least weighted error wins;
//   2. the sub-block scales (and mins) become integer codes of a block
//      scale d (dmin) by the same search, each sub-block's scale weighted by
//      how much an error in it costs: sum w q^2 for a scale, sum w for a min;
//   3. codes are re-rounded against the stored (f16, integer) scales, then
//      d and dmin are refit over the whole block by least squares and the
//      codes re-rounded again, kept only when the error drops.
// Plain values in, bytes out: the same input gives the same bytes on every
// machine (no threads, no ISA-specific code).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "common/logging.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/quant_pack.h"
#include "daemon/kernels/quantize.h"
#include "daemon/kernels/quantize_iq.h"

namespace waste::kernels {
namespace {

using internal::PackFiveBits;
using internal::PackKNibbles;
using internal::PackNibbles;

// round(v) clamped to [lo, hi], ties to even as std::nearbyint in the
// default rounding mode, without its library call (the searches below round
// every element for every candidate scale): adding 1.5 * 2^23 leaves the
// rounded integer in the low mantissa bits, exact for |v| < 2^22, which
// the clamp to [lo - 1, hi + 1] guarantees.
inline int RoundClamp(float v, int lo, int hi) {
  const float c = std::clamp(v, static_cast<float>(lo - 1), static_cast<float>(hi + 1));
  const float f = c + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &f, sizeof(i));
  return std::clamp((i & 0x007fffff) - 0x00400000, lo, hi);
}

// x ~= scale * q + offset, q in [0, levels]. K-quants store -offset as a
// non-negative min, so offset <= 0 unless `free_offset` (Q4_1, Q5_1).
struct AffineFit {
  float scale = 0;
  float offset = 0;
};

AffineFit FitAffine(const float* x, const float* w, int n, int levels, bool free_offset,
                    uint8_t* q) {
  float lo = *std::min_element(x, x + n);
  const float hi = *std::max_element(x, x + n);
  if (!free_offset) lo = std::min(lo, 0.0f);
  AffineFit best{0, lo};
  if (hi <= lo) {
    std::fill(q, q + n, 0);
    return best;
  }
  double sw = 0, sx = 0, sxx = 0;
  for (int i = 0; i < n; ++i) sw += w[i], sx += w[i] * x[i], sxx += w[i] * x[i] * x[i];
  // The weighted error of y = a l + b from the sums, in one pass per
  // candidate: sum w (a l + b - x)^2.
  auto error = [&](double a, double b, double sl, double sll, double sxl) {
    return sxx - 2 * a * sxl - 2 * b * sx + a * a * sll + 2 * a * b * sl + b * b * sw;
  };
  uint8_t l[kQK_K];
  // The plain range fit is the first candidate.
  best.scale = (hi - lo) / levels;
  {
    const float iscale = 1 / best.scale;
    double sl = 0, sll = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      q[i] = static_cast<uint8_t>(RoundClamp((x[i] - lo) * iscale, 0, levels));
      sl += w[i] * q[i], sll += w[i] * q[i] * q[i], sxl += w[i] * q[i] * x[i];
    }
    double best_err = error(best.scale, lo, sl, sll, sxl);
    for (int t = 0; t <= 40; ++t) {
      const float candidate = (levels - 1.0f + 0.05f * t) / (hi - lo);
      sl = sll = sxl = 0;
      for (int i = 0; i < n; ++i) {
        l[i] = static_cast<uint8_t>(RoundClamp(candidate * (x[i] - lo), 0, levels));
        sl += w[i] * l[i], sll += w[i] * l[i] * l[i], sxl += w[i] * l[i] * x[i];
      }
      const double det = sw * sll - sl * sl;
      if (det <= 0) continue;
      double a = (sw * sxl - sx * sl) / det;
      double b = (sll * sx - sl * sxl) / det;
      if (!free_offset && b > 0) b = 0, a = sxl / sll;
      if (a <= 0) continue;
      const double err = error(a, b, sl, sll, sxl);
      if (err < best_err) {
        best_err = err;
        best = {static_cast<float>(a), static_cast<float>(b)};
        std::copy(l, l + n, q);
      }
    }
  }
  return best;
}

// x ~= scale * q, q in [-nmax, nmax - 1] (the extreme element goes to -nmax,
// the level without a positive twin, so scale takes its sign). Returns the
// scale; q gets the codes.
float FitSymmetric(const float* x, const float* w, int n, int nmax, int* q) {
  float max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(max)) max = x[i];
  }
  std::fill(q, q + n, 0);
  if (max == 0) return 0;
  float best_scale = 0;
  double best_score = -1;
  int l[kQK_K];
  for (int t = -10; t <= 10; ++t) {
    const float iscale = -(nmax + 0.1f * t) / max;
    double sxl = 0, sll = 0;
    for (int i = 0; i < n; ++i) {
      l[i] = RoundClamp(iscale * x[i], -nmax, nmax - 1);
      sxl += w[i] * x[i] * l[i], sll += w[i] * l[i] * l[i];
    }
    // With the least-squares scale sxl / sll the error is
    // sum w x^2 - sxl^2 / sll: the largest score is the least error.
    if (sll <= 0) continue;
    const double score = sxl * sxl / sll;
    if (score > best_score) {
      best_score = score;
      best_scale = static_cast<float>(sxl / sll);
      std::copy(l, l + n, q);
    }
  }
  return best_scale;
}

// Non-negative values v as d * L, L in [0, nmax], minimizing
// sum W (v - d L)^2. Returns d.
float FitScaleCodes(const float* v, const float* W, int n, int nmax, int* L) {
  const float max = *std::max_element(v, v + n);
  std::fill(L, L + n, 0);
  if (max <= 0) return 0;
  float best_d = max / nmax;
  double best_err = -1;
  int l[16];
  for (int t = -8; t <= 8; ++t) {
    const float id = (nmax + 0.1f * t) / max;
    double svl = 0, sll = 0;
    for (int k = 0; k < n; ++k) {
      l[k] = RoundClamp(id * v[k], 0, nmax);
      svl += W[k] * v[k] * l[k], sll += W[k] * l[k] * l[k];
    }
    if (sll <= 0) continue;
    const float d = static_cast<float>(svl / sll);
    double err = 0;
    for (int k = 0; k < n; ++k) err += W[k] * (v[k] - d * l[k]) * (v[k] - d * l[k]);
    if (best_err < 0 || err < best_err) {
      best_err = err, best_d = d;
      std::copy(l, l + n, L);
    }
  }
  return best_d;
}

// Weights that are all zero carry no preference: treat them as equal.
void NonZeroWeights(float* W, int n) {
  float total = 0;
  for (int k = 0; k < n; ++k) total += W[k];
  if (total <= 0) std::fill(W, W + n, 1.0f);
}

// ---- Q2_K, Q4_K, Q5_K: x = d * sc[k] * q - dmin * m[k].

struct AffineK {
  int sub;        // Elements per sub-block (16, 32).
  int levels;     // Codes 0 .. levels.
  int scale_max;  // sc and m codes 0 .. scale_max.
};

// Codes of a block against stored scales; returns the weighted error.
double EncodeAffineK(const AffineK& f, const float* x, const float* w, float d, float dmin,
                     const int* sc, const int* m, uint8_t* q) {
  double err = 0;
  for (int k = 0; k < kQK_K / f.sub; ++k) {
    const float step = d * sc[k], offset = dmin * m[k];
    const float inv = step > 0 ? 1 / step : 0;
    for (int i = k * f.sub; i < (k + 1) * f.sub; ++i) {
      q[i] = static_cast<uint8_t>(RoundClamp((x[i] + offset) * inv, 0, f.levels));
      const float e = step * q[i] - offset - x[i];
      err += w[i] * e * e;
    }
  }
  return err;
}

// Chooses d, dmin, sc, m and q for one block.
void SearchAffineK(const AffineK& f, const float* x, const float* w, Half* d_out, Half* dmin_out,
                   int* sc, int* m, uint8_t* q) {
  const int subs = kQK_K / f.sub;
  float scale[16], min[16], w_scale[16], w_min[16];
  for (int k = 0; k < subs; ++k) {
    const float* xs = x + k * f.sub;
    const float* ws = w + k * f.sub;
    const AffineFit fit = FitAffine(xs, ws, f.sub, f.levels, false, q + k * f.sub);
    scale[k] = fit.scale;
    min[k] = -fit.offset;
    w_scale[k] = w_min[k] = 0;
    for (int i = 0; i < f.sub; ++i) {
      const float qi = q[k * f.sub + i];
      w_scale[k] += ws[i] * qi * qi;
      w_min[k] += ws[i];
    }
  }
  NonZeroWeights(w_scale, subs);
  NonZeroWeights(w_min, subs);
  Half d_h = F32ToF16(FitScaleCodes(scale, w_scale, subs, f.scale_max, sc));
  Half dmin_h = F32ToF16(FitScaleCodes(min, w_min, subs, f.scale_max, m));
  double err = EncodeAffineK(f, x, w, F16ToF32(d_h), F16ToF32(dmin_h), sc, m, q);
  // Refit d and dmin to every code of the block: x ~= d * (sc q) - dmin * m.
  uint8_t trial[kQK_K];
  for (int iter = 0; iter < 2; ++iter) {
    double saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0;
    for (int i = 0; i < kQK_K; ++i) {
      const double a = sc[i / f.sub] * q[i], b = -m[i / f.sub];
      saa += w[i] * a * a, sab += w[i] * a * b, sbb += w[i] * b * b;
      sxa += w[i] * x[i] * a, sxb += w[i] * x[i] * b;
    }
    const double det = saa * sbb - sab * sab;
    double d = 0, dmin = 0;
    if (det > 0) {
      d = (sxa * sbb - sxb * sab) / det;
      dmin = (saa * sxb - sab * sxa) / det;
    }
    if (det <= 0 || dmin < 0) d = saa > 0 ? sxa / saa : 0, dmin = 0;
    if (d <= 0) break;
    const Half td = F32ToF16(static_cast<float>(d));
    const Half tdmin = F32ToF16(static_cast<float>(dmin));
    const double e = EncodeAffineK(f, x, w, F16ToF32(td), F16ToF32(tdmin), sc, m, trial);
    if (e >= err) break;
    err = e, d_h = td, dmin_h = tdmin;
    std::copy(trial, trial + kQK_K, q);
  }
  *d_out = d_h;
  *dmin_out = dmin_h;
}

void PackScaleMinK4(const int* sc, const int* m, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] |= static_cast<uint8_t>(sc[j]);
      scales[j + 4] |= static_cast<uint8_t>(m[j]);
    } else {
      scales[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
}

void QuantizeQ4K(const float* x, const float* w, BlockQ4_K* b) {
  int sc[8], m[8];
  uint8_t q[kQK_K];
  SearchAffineK({32, 15, 63}, x, w, &b->d, &b->dmin, sc, m, q);
  PackScaleMinK4(sc, m, b->scales);
  PackKNibbles(q, b->qs);
}

void QuantizeQ5K(const float* x, const float* w, BlockQ5_K* b) {
  int sc[8], m[8];
  uint8_t q[kQK_K];
  SearchAffineK({32, 31, 63}, x, w, &b->d, &b->dmin, sc, m, q);
  PackScaleMinK4(sc, m, b->scales);
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 32; ++l) b->qh[l] |= static_cast<uint8_t>(((q[32 * j + l] >> 4) & 1) << j);
  }
  PackKNibbles(q, b->qs);
}

void QuantizeQ2K(const float* x, const float* w, BlockQ2_K* b) {
  int sc[16], m[16];
  uint8_t q[kQK_K];
  SearchAffineK({16, 3, 15}, x, w, &b->d, &b->dmin, sc, m, q);
  std::memset(b->qs, 0, sizeof(b->qs));
  for (int k = 0; k < 16; ++k) {
    b->scales[k] = static_cast<uint8_t>(sc[k] | (m[k] << 4));
    const int g = k / 2;
    for (int l = 0; l < 16; ++l) {
      b->qs[32 * (g / 4) + 16 * (k % 2) + l] |=
          static_cast<uint8_t>(q[16 * k + l] << (2 * (g % 4)));
    }
  }
}

// ---- Q3_K, Q6_K: x = d * sc[k] * q, q in [-nmax, nmax - 1], signed sc.

struct SymmetricK {
  int nmax;       // Codes -nmax .. nmax - 1.
  int scale_max;  // sc codes -scale_max .. scale_max - 1.
};

double EncodeSymmetricK(const SymmetricK& f, const float* x, const float* w, float d, const int* sc,
                        int* q) {
  double err = 0;
  for (int k = 0; k < 16; ++k) {
    const float step = d * sc[k];
    const float inv = step != 0 ? 1 / step : 0;
    for (int i = 16 * k; i < 16 * (k + 1); ++i) {
      q[i] = RoundClamp(x[i] * inv, -f.nmax, f.nmax - 1);
      const float e = step * q[i] - x[i];
      err += w[i] * e * e;
    }
  }
  return err;
}

void SearchSymmetricK(const SymmetricK& f, const float* x, const float* w, Half* d_out, int* sc,
                      int* q) {
  float scale[16], w_scale[16];
  for (int k = 0; k < 16; ++k) {
    scale[k] = FitSymmetric(x + 16 * k, w + 16 * k, 16, f.nmax, q + 16 * k);
    w_scale[k] = 0;
    for (int i = 16 * k; i < 16 * (k + 1); ++i) w_scale[k] += w[i] * q[i] * q[i];
  }
  NonZeroWeights(w_scale, 16);
  Half d_h = F32ToF16(FitSymmetric(scale, w_scale, 16, f.scale_max, sc));
  double err = EncodeSymmetricK(f, x, w, F16ToF32(d_h), sc, q);
  int trial[kQK_K];
  for (int iter = 0; iter < 2; ++iter) {
    double saa = 0, sxa = 0;
    for (int i = 0; i < kQK_K; ++i) {
      const double a = sc[i / 16] * q[i];
      saa += w[i] * a * a, sxa += w[i] * x[i] * a;
    }
    if (saa <= 0) break;
    const Half td = F32ToF16(static_cast<float>(sxa / saa));
    const double e = EncodeSymmetricK(f, x, w, F16ToF32(td), sc, trial);
    if (e >= err) break;
    err = e, d_h = td;
    std::copy(trial, trial + kQK_K, q);
  }
  *d_out = d_h;
}

void QuantizeQ3K(const float* x, const float* w, BlockQ3_K* b) {
  int sc[16], q[kQK_K];
  SearchSymmetricK({4, 32}, x, w, &b->d, sc, q);
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
}

void QuantizeQ6K(const float* x, const float* w, BlockQ6_K* b) {
  int sc[16], q[kQK_K];
  SearchSymmetricK({32, 128}, x, w, &b->d, sc, q);
  for (int k = 0; k < 16; ++k) b->scales[k] = static_cast<int8_t>(sc[k]);
  std::memset(b->ql, 0, sizeof(b->ql));
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int half = 0; half < 2; ++half) {
    for (int r = 0; r < 4; ++r) {
      for (int l = 0; l < 32; ++l) {
        const int v = q[128 * half + 32 * r + l] + 32;
        b->ql[64 * half + l + 32 * (r & 1)] |= static_cast<uint8_t>((v & 0xF) << (4 * (r >> 1)));
        b->qh[32 * half + l] |= static_cast<uint8_t>((v >> 4) << (2 * r));
      }
    }
  }
}

// ---- IQ4_NL, IQ4_XS: x = d * kIq4NlValues[q].

// The IQ4 level nearest v by a table over half-units: the boundaries
// between levels are midpoints of integers, so the answer is constant on
// each [k/2, (k+1)/2) (at an exact midpoint it takes the upper level).
int NearestIq4(float v) {
  static const auto table = [] {
    std::array<uint8_t, 512> t{};
    for (int k = 0; k < 512; ++k) {
      const float u = (k - 256) / 2.0f + 0.25f;  // Inside the half-unit.
      int best = 0;
      for (int j = 1; j < 16; ++j) {
        if (std::fabs(u - kIq4NlValues[j]) < std::fabs(u - kIq4NlValues[best])) best = j;
      }
      t[k] = static_cast<uint8_t>(best);
    }
    return t;
  }();
  const float c = std::clamp(2 * v, -256.0f, 255.0f);
  return table[static_cast<int>(std::floor(c)) + 256];
}

double EncodeIq4(const float* x, const float* w, int n, float d, int* idx) {
  double err = 0;
  const float id = d != 0 ? 1 / d : 0;
  for (int i = 0; i < n; ++i) {
    idx[i] = NearestIq4(x[i] * id);
    const float e = d * kIq4NlValues[idx[i]] - x[i];
    err += w[i] * e * e;
  }
  return err;
}

// The scale of one group of 32: candidates put the largest magnitude on
// either end level and points between; each candidate's codes get their
// least-squares scale sum w x v / sum w v^2, scored by the error that scale
// leaves with those codes (sum w x^2 - (sum w x v)^2 / sum w v^2). Fills
// idx with the codes at the returned scale.
float SearchIq4Scale(const float* x, const float* w, int* idx) {
  float amax = 0;
  for (int i = 0; i < kQK32; ++i) {
    if (std::fabs(x[i]) > std::fabs(amax)) amax = x[i];
  }
  if (amax == 0) {
    std::fill(idx, idx + kQK32, NearestIq4(0));
    return 0;
  }
  float best_d = amax / -127;
  double best_score = -1;
  for (int t = -7; t <= 7; ++t) {
    for (float end : {-127.0f, 113.0f}) {
      const float id = (end + (end < 0 ? t : t / 2.0f)) / amax;
      double sxv = 0, svv = 0;
      for (int i = 0; i < kQK32; ++i) {
        const float v = kIq4NlValues[NearestIq4(x[i] * id)];
        sxv += w[i] * x[i] * v, svv += w[i] * v * v;
      }
      if (svv <= 0) continue;
      const double score = sxv * sxv / svv;
      if (score > best_score) best_score = score, best_d = static_cast<float>(sxv / svv);
    }
  }
  EncodeIq4(x, w, kQK32, best_d, idx);
  return best_d;
}

void QuantizeIQ4NL(const float* x, const float* w, BlockIQ4_NL* b) {
  int idx[kQK32];
  b->d = F32ToF16(SearchIq4Scale(x, w, idx));
  EncodeIq4(x, w, kQK32, F16ToF32(b->d), idx);
  PackNibbles(idx, b->qs);
}

double EncodeIq4Xs(const float* x, const float* w, float d, const int* ls, int* idx) {
  double err = 0;
  for (int g = 0; g < 8; ++g) {
    err += EncodeIq4(x + 32 * g, w + 32 * g, kQK32, d * ls[g], idx + 32 * g);
  }
  return err;
}

void QuantizeIQ4XS(const float* x, const float* w, BlockIQ4_XS* b) {
  float scale[8], w_scale[8];
  int idx[kQK_K];
  for (int g = 0; g < 8; ++g) {
    scale[g] = SearchIq4Scale(x + 32 * g, w + 32 * g, idx + 32 * g);
    w_scale[g] = 0;
    for (int i = 32 * g; i < 32 * (g + 1); ++i) {
      const float v = kIq4NlValues[idx[i]];
      w_scale[g] += w[i] * v * v;
    }
  }
  NonZeroWeights(w_scale, 8);
  int ls[8];
  Half d_h = F32ToF16(FitSymmetric(scale, w_scale, 8, 32, ls));
  double err = EncodeIq4Xs(x, w, F16ToF32(d_h), ls, idx);
  int trial[kQK_K];
  for (int iter = 0; iter < 2; ++iter) {
    double saa = 0, sxa = 0;
    for (int i = 0; i < kQK_K; ++i) {
      const double a = ls[i / 32] * kIq4NlValues[idx[i]];
      saa += w[i] * a * a, sxa += w[i] * x[i] * a;
    }
    if (saa <= 0) break;
    const Half td = F32ToF16(static_cast<float>(sxa / saa));
    const double e = EncodeIq4Xs(x, w, F16ToF32(td), ls, trial);
    if (e >= err) break;
    err = e, d_h = td;
    std::copy(trial, trial + kQK_K, idx);
  }
  b->d = d_h;
  b->scales_h = 0;
  std::memset(b->scales_l, 0, sizeof(b->scales_l));
  for (int g = 0; g < 8; ++g) {
    b->scales_l[g / 2] |= static_cast<uint8_t>(((ls[g] + 32) & 0xF) << (4 * (g % 2)));
    b->scales_h |= static_cast<uint16_t>(((ls[g] + 32) >> 4) << (2 * g));
    PackNibbles(idx + 32 * g, b->qs + 16 * g);
  }
}

// ---- Q4_0, Q5_0 (x = d * (q - 2^(b-1))) and Q4_1, Q5_1 (x = d * q + m).

// Symmetric b-bit codes q + 2^(b-1) of 32 values; returns d (f16).
Half LegacySymmetric(const float* x, const float* w, int bits, int* q) {
  const int half = 1 << (bits - 1);
  const Half d = F32ToF16(FitSymmetric(x, w, kQK32, half, q));
  const float df = F16ToF32(d);
  for (int j = 0; j < kQK32; ++j) {
    q[j] = (df != 0 ? RoundClamp(x[j] / df, -half, half - 1) : 0) + half;
  }
  return d;
}

// Affine b-bit codes of 32 values; d and m (f16).
void LegacyAffine(const float* x, const float* w, int bits, Half* d, Half* m, int* q) {
  const int levels = (1 << bits) - 1;
  uint8_t l[kQK32];
  const AffineFit fit = FitAffine(x, w, kQK32, levels, true, l);
  *d = F32ToF16(fit.scale);
  *m = F32ToF16(fit.offset);
  const float df = F16ToF32(*d), mf = F16ToF32(*m);
  for (int j = 0; j < kQK32; ++j) q[j] = df > 0 ? RoundClamp((x[j] - mf) / df, 0, levels) : 0;
}

}  // namespace

namespace internal {

void ElementWeights(const float* x, const float* importance, int n, float* w) {
  double sum_x2 = 0;
  for (int i = 0; i < n; ++i) sum_x2 += static_cast<double>(x[i]) * x[i];
  const float sigma2 = static_cast<float>(2 * sum_x2 / n);
  double total = 0;
  for (int i = 0; i < n; ++i) {
    w[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
    total += w[i];
  }
  // A block no activation reached: weigh by magnitude alone.
  if (total <= 0) {
    for (int i = 0; i < n; ++i) w[i] = std::sqrt(sigma2 + x[i] * x[i]);
  }
}

}  // namespace internal

void QuantizeRowWeighted(WeightType type, const float* src, void* dst, int64_t n,
                         const float* importance) {
  if (importance == nullptr) return QuantizeRow(type, src, dst, n);
  const WeightTypeInfo info = GetWeightTypeInfo(type);
  WCHECK(info.block_elems > 0 && n % info.block_elems == 0)
      << info.name << " row of " << n << " elements";
  if (IsGridType(type)) return internal::QuantizeGridRow(type, src, dst, n, importance);
  const int block = info.block_elems;
  float w[kQK_K];
  int q[kQK32];
  for (int64_t i = 0; i < n / block; ++i) {
    const float* x = src + i * block;
    uint8_t* out = static_cast<uint8_t*>(dst) + i * info.block_bytes;
    internal::ElementWeights(x, importance + i * block, block, w);
    switch (type) {
      case WeightType::kQ2_K:
        QuantizeQ2K(x, w, reinterpret_cast<BlockQ2_K*>(out));
        break;
      case WeightType::kQ3_K:
        QuantizeQ3K(x, w, reinterpret_cast<BlockQ3_K*>(out));
        break;
      case WeightType::kQ4_K:
        QuantizeQ4K(x, w, reinterpret_cast<BlockQ4_K*>(out));
        break;
      case WeightType::kQ5_K:
        QuantizeQ5K(x, w, reinterpret_cast<BlockQ5_K*>(out));
        break;
      case WeightType::kQ6_K:
        QuantizeQ6K(x, w, reinterpret_cast<BlockQ6_K*>(out));
        break;
      case WeightType::kIQ4_NL:
        QuantizeIQ4NL(x, w, reinterpret_cast<BlockIQ4_NL*>(out));
        break;
      case WeightType::kIQ4_XS:
        QuantizeIQ4XS(x, w, reinterpret_cast<BlockIQ4_XS*>(out));
        break;
      case WeightType::kQ4_0: {
        auto* b = reinterpret_cast<BlockQ4_0*>(out);
        b->d = LegacySymmetric(x, w, 4, q);
        PackNibbles(q, b->qs);
        break;
      }
      case WeightType::kQ5_0: {
        auto* b = reinterpret_cast<BlockQ5_0*>(out);
        b->d = LegacySymmetric(x, w, 5, q);
        PackFiveBits(q, b->qh, b->qs);
        break;
      }
      case WeightType::kQ4_1: {
        auto* b = reinterpret_cast<BlockQ4_1*>(out);
        LegacyAffine(x, w, 4, &b->d, &b->m, q);
        PackNibbles(q, b->qs);
        break;
      }
      case WeightType::kQ5_1: {
        auto* b = reinterpret_cast<BlockQ5_1*>(out);
        LegacyAffine(x, w, 5, &b->d, &b->m, q);
        PackFiveBits(q, b->qh, b->qs);
        break;
      }
      default:
        // F32, F16, BF16, Q8_0: rounding is all there is.
        QuantizeRow(type, x, out, block);
        break;
    }
  }
}

bool QuantizeRequiresImportance(WeightType type) {
  switch (type) {
    case WeightType::kIQ1_S:
    case WeightType::kIQ1_M:
    case WeightType::kIQ2_XXS:
    case WeightType::kIQ2_XS:
    case WeightType::kIQ2_S:
      return true;
    default:
      return false;
  }
}

}  // namespace waste::kernels
