#include "daemon/kernels/ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/logging.h"
#include "daemon/kernels/ops/kernels_internal.h"

namespace waste::kernels::ops {
namespace {

void CheckParams(const RopeParams& p) {
  WCHECK(p.n_rot >= 2 && p.n_rot % 2 == 0) << "RoPE n_rot must be even and >= 2, got " << p.n_rot;
  WCHECK(p.freq_base > 0 && p.freq_scale > 0)
      << "RoPE freq_base=" << p.freq_base << " freq_scale=" << p.freq_scale;
  WCHECK(p.ext_factor == 0 || p.n_ctx_orig > 0) << "YaRN (ext_factor != 0) needs n_ctx_orig > 0";
}

// Solving n_rot = 2 pi x base^(2 max_pos / n_dims) for x, as ggml does; kept
// in float like ggml because floor/ceil below make it discontinuous.
float YarnCorrDim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return n_dims * std::log(n_ctx_orig / (n_rot * 2 * std::numbers::pi_v<float>)) /
         (2 * std::log(base));
}

}  // namespace

void RopeYarnCorrDims(int n_rot, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                      float dims[2]) {
  const float start = std::floor(YarnCorrDim(n_rot, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(YarnCorrDim(n_rot, n_ctx_orig, beta_slow, freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(n_rot - 1), end);
}

int64_t RopeTableFloats(const RopeParams& params) { return 2 * static_cast<int64_t>(params.n_rot); }

void RopeTableInit(const RopeParams& p, int64_t pos, float* table) {
  CheckParams(p);
  WCHECK(pos >= 0 && table != nullptr) << "RopeTableInit pos=" << pos;
  float corr[2] = {0, 0};
  double mscale = p.attn_factor;
  if (p.ext_factor != 0) {
    RopeYarnCorrDims(p.n_rot, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, corr);
    mscale *= 1.0 + 0.1 * std::log(1.0 / p.freq_scale);
  }
  const int half = p.n_rot / 2;
  float* cos = table;
  float* sin = table + p.n_rot;
  for (int i = 0; i < half; ++i) {
    const double ff = p.freq_factors != nullptr ? p.freq_factors[i] : 1.0;
    const double theta_extrap = static_cast<double>(pos) *
                                std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot) / ff;
    const double theta_interp = p.freq_scale * theta_extrap;
    double theta = theta_interp;
    if (p.ext_factor != 0) {
      const double y = (i - corr[0]) / std::max(0.001, static_cast<double>(corr[1] - corr[0]));
      const double ramp = 1.0 - std::clamp(y, 0.0, 1.0);
      const double mix = ramp * p.ext_factor;
      theta = theta_interp * (1 - mix) + theta_extrap * mix;
    }
    const float c = static_cast<float>(std::cos(theta) * mscale);
    const float s = static_cast<float>(std::sin(theta) * mscale);
    // Indices of the pair's two dims; see the layout in rope.h.
    const int a = p.mode == RopeMode::kNeox ? i : 2 * i;
    const int b = p.mode == RopeMode::kNeox ? i + half : 2 * i + 1;
    cos[a] = c;
    cos[b] = c;
    sin[a] = -s;
    sin[b] = s;
  }
}

void RopeApply(const RopeParams& params, const float* table, int64_t n_heads, int head_dim,
               const float* x, float* y, Isa isa) {
  CheckParams(params);
  WCHECK(params.n_rot <= head_dim) << "RoPE n_rot=" << params.n_rot << " > head_dim=" << head_dim;
  WCHECK(n_heads >= 0 && table != nullptr && x != nullptr && y != nullptr)
      << "RopeApply n_heads=" << n_heads;
  const int64_t n = n_heads * head_dim;
  WCHECK(x == y || x + n <= y || y + n <= x) << "RopeApply input and output partially overlap";
  if (n_heads == 0) return;
  internal::KernelsFor(isa).rope(table, params.mode == RopeMode::kNeox, params.n_rot, n_heads,
                                 head_dim, x, y);
}

}  // namespace waste::kernels::ops
