// Rotary position embedding (RoPE) with ggml's semantics: normal (ggml mode
// 0, llama: pairs (2i, 2i+1)) and NeoX (ggml mode 2, qwen2/3, gpt-neox:
// pairs (i, i + n_rot/2)) pairing, partial rotation (n_rot <= head_dim),
// linear scaling (freq_scale), YaRN (ext_factor, attn_factor, beta_fast,
// beta_slow, n_ctx_orig) and per-pair frequency factors (llama3's
// rope_freqs.weight).
//
// For pair i (0 <= i < n_rot/2) at position p, as in ggml's rope_yarn:
//   theta_extrap = p * freq_base^(-2i/n_rot) / freq_factors[i]
//   theta_interp = freq_scale * theta_extrap
//   if ext_factor == 0: theta = theta_interp, mscale = attn_factor
//   else: mix = ext_factor * (1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1))
//         theta = theta_interp * (1 - mix) + theta_extrap * mix
//         mscale = attn_factor * (1 + 0.1 ln(1 / freq_scale))
//   (lo, hi) = ggml_rope_yarn_corr_dims(n_rot, n_ctx_orig, freq_base,
//              beta_fast, beta_slow)
//   (x_a, x_b) <- mscale * (x_a cos - x_b sin, x_a sin + x_b cos)
// Dims n_rot .. head_dim-1 are copied unchanged.
//
// Usage: a table depends only on the params and the position, so a decode
// step builds it once (RopeTableInit) and applies it to Q and K of every
// layer that shares the params (RopeApply). The table is computed in double,
// so it is a little more accurate than ggml's iterated float theta.
//
// Thread-safety: pure functions; RopeParams::freq_factors is only read.
#ifndef WASTE_DAEMON_KERNELS_OPS_ROPE_H_
#define WASTE_DAEMON_KERNELS_OPS_ROPE_H_

#include <cstdint>

#include "daemon/kernels/ops/isa.h"

namespace waste::kernels::ops {

enum class RopeMode {
  kNormal,  // ggml mode 0 (GGML_ROPE_TYPE_NORM): llama, mistral.
  kNeox,    // ggml mode 2 (GGML_ROPE_TYPE_NEOX): qwen2/3, gpt-neox, phi.
};

struct RopeParams {
  RopeMode mode = RopeMode::kNormal;
  int n_rot = 0;  // Rotated dims: even, >= 2, <= head_dim.
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // Linear scaling: 1 / scaling factor.
  float ext_factor = 0.0f;   // YaRN extrapolation mix; 0 disables YaRN.
  float attn_factor = 1.0f;  // Magnitude scale of cos/sin.
  float beta_fast = 32.0f;   // YaRN correction range.
  float beta_slow = 1.0f;
  int n_ctx_orig = 0;  // Training context; > 0 when ext_factor != 0.
  // n_rot / 2 divisors of theta (rope_freqs.weight), or null. Borrowed: must
  // outlive the RopeTableInit calls.
  const float* freq_factors = nullptr;
};

// Floats in one position's table: 2 * n_rot.
int64_t RopeTableFloats(const RopeParams& params);

// Fills `table` (RopeTableFloats floats) for position `pos` (>= 0). Layout,
// for the kernels only: cos[n_rot] then signed sin[n_rot], indexed by the
// rotated dim, such that y[j] = x[j] * cos[j] + x[partner(j)] * sin[j].
void RopeTableInit(const RopeParams& params, int64_t pos, float* table);

// Rotates x [n_heads, head_dim] (row-major, contiguous) into y with a table
// from RopeTableInit for the same params. y may equal x (in place).
void RopeApply(const RopeParams& params, const float* table, int64_t n_heads, int head_dim,
               const float* x, float* y, Isa isa = Isa::kAuto);

// ggml_rope_yarn_corr_dims: the pair range [lo, hi] over which YaRN blends
// interpolation into extrapolation. Exposed for tests and model loaders.
void RopeYarnCorrDims(int n_rot, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                      float dims[2]);

}  // namespace waste::kernels::ops

#endif  // WASTE_DAEMON_KERNELS_OPS_ROPE_H_
