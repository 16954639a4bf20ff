// Scalar reference kernels: the oracle every vector ISA is tested against.
// Written for obviousness, not speed: double accumulation, libm exp/tanh,
// two-pass softmax in attention.
#include <cmath>
#include <cstdint>

#include "daemon/kernels/ops/fp16.h"
#include "daemon/kernels/ops/kernels_internal.h"

namespace waste::kernels::ops::internal {
namespace {

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>(x[i] * inv * (w != nullptr ? w[i] : 1.0));
  }
}

void LayerNorm(const float* x, const float* w, const float* b, int64_t n, float eps, float* y) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
  const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    double v = (x[i] - mean) * inv;
    if (w != nullptr) v *= w[i];
    if (b != nullptr) v += b[i];
    y[i] = static_cast<float>(v);
  }
}

void Softmax(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = std::exp(static_cast<double>(x[i]) - max);
    x[i] = static_cast<float>(e);
    sum += e;
  }
  const double inv = 1.0 / sum;
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] * inv);
}

double SiluRef(double x) { return x / (1.0 + std::exp(-x)); }

void Silu(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(SiluRef(x[i]));
}

// ggml's tanh approximation of GELU.
void Gelu(const float* x, int64_t n, float* y) {
  constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
  constexpr double kCoef = 0.044715;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] =
        static_cast<float>(0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * v * (1.0 + kCoef * v * v))));
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(SiluRef(gate[i]) * up[i]);
}

void Add(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void Mul(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void Scale(const float* x, float s, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

// y[j] = x[j] * cos[j] + x[partner(j)] * sin[j]; the table holds cos and the
// signed sin per rotated dim (see rope.h), so both modes share this formula.
void Rope(const float* table, bool neox, int n_rot, int64_t n_heads, int head_dim, const float* x,
          float* y) {
  const float* cos = table;
  const float* sin = table + n_rot;
  const int half = n_rot / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* xh = x + h * head_dim;
    float* yh = y + h * head_dim;
    for (int j = 0; j < n_rot; j += 2) {
      // Read both members of the pair before writing: x may == y.
      const int a = neox ? j / 2 : j;
      const int b = neox ? j / 2 + half : j + 1;
      const double xa = xh[a];
      const double xb = xh[b];
      yh[a] = static_cast<float>(xa * cos[a] + xb * sin[a]);
      yh[b] = static_cast<float>(xb * cos[b] + xa * sin[b]);
    }
    for (int j = n_rot; j < head_dim; ++j) yh[j] = xh[j];
  }
}

void HalfToFloatRowImpl(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void FloatToHalfRowImpl(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

double KvAt(const AttentionUnit& u, int64_t pos, int i, const void* base) {
  const int64_t idx = (u.ring > 0 ? pos % u.ring : pos) * u.kv_stride + i;
  return u.kv_f16 ? HalfToFloat(static_cast<const uint16_t*>(base)[idx])
                  : static_cast<const float*>(base)[idx];
}

double Score(const AttentionUnit& u, const float* q, int64_t pos) {
  double dot = 0;
  for (int i = 0; i < u.head_dim; ++i) dot += q[i] * KvAt(u, pos, i, u.k);
  dot *= u.scale;
  return u.softcap > 0 ? u.softcap * std::tanh(dot / u.softcap) : dot;
}

// Two passes over the cache (max, then exp-weighted sum), so no score buffer
// is needed and the result is exactly softmax(q K^T * scale) V in double.
void AttentionUnitImpl(const AttentionUnit& u) {
  constexpr int kMaxHeadDim = 1024;  // Checked by attention.cc.
  double acc[kMaxHeadDim];
  for (int h = 0; h < u.n_q; ++h) {
    const float* q = u.q + h * u.q_stride;
    const double sink = u.sinks != nullptr ? u.sinks[h] : -INFINITY;
    double max = sink;
    for (int64_t pos = u.first_pos; pos < u.n_pos; ++pos) {
      const double s = Score(u, q, pos);
      max = s > max ? s : max;
    }
    for (int i = 0; i < u.head_dim; ++i) acc[i] = 0;
    double sum = std::exp(sink - max);
    for (int64_t pos = u.first_pos; pos < u.n_pos; ++pos) {
      const double p = std::exp(Score(u, q, pos) - max);
      sum += p;
      for (int i = 0; i < u.head_dim; ++i) acc[i] += p * KvAt(u, pos, i, u.v);
    }
    float* out = u.out + h * u.out_stride;
    for (int i = 0; i < u.head_dim; ++i) out[i] = static_cast<float>(acc[i] / sum);
  }
}

}  // namespace

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = {
      .rms_norm = RmsNorm,
      .layer_norm = LayerNorm,
      .softmax = Softmax,
      .silu = Silu,
      .gelu = Gelu,
      .swiglu = SwiGlu,
      .add = Add,
      .mul = Mul,
      .scale = Scale,
      .rope = Rope,
      .half_to_float = HalfToFloatRowImpl,
      .float_to_half = FloatToHalfRowImpl,
      .attention_unit = AttentionUnitImpl,
  };
  return kKernels;
}

}  // namespace waste::kernels::ops::internal
