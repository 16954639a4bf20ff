// Element-wise and normalisation ops of the transformer forward pass, on
// contiguous f32 rows.
//
// Each op validates its arguments (CHECK: a bad shape here is a bug in the
// caller, not bad user input) and then runs the scalar, AVX2 or AVX-512
// kernel for `isa` (default: the best this CPU has; see isa.h). Vector
// results match the scalar reference to float rounding, not bit for bit.
//
// Aliasing: an output may be the same pointer as an input (in place) but
// must not otherwise overlap one. Lengths may be any n >= 0 (n >= 1 where
// stated); no alignment is required.
// Thread-safety: pure functions of their arguments; no allocation.
#ifndef WASTE_DAEMON_KERNELS_OPS_OPS_H_
#define WASTE_DAEMON_KERNELS_OPS_OPS_H_

#include <cstdint>

#include "daemon/kernels/ops/isa.h"

namespace waste::kernels::ops {

// y = x * weight / sqrt(mean(x^2) + eps) over n >= 1 values. weight may be
// null (no weight). The mean of squares is accumulated in f32 vector lanes
// (double in the scalar reference).
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* y,
             Isa isa = Isa::kAuto);

// y = (x - mean) / sqrt(var + eps) * weight + bias over n >= 1 values;
// weight and bias may each be null. Variance is the biased (1/n) one, as in
// ggml_norm.
void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n, float eps,
               float* y, Isa isa = Isa::kAuto);

// x = exp(x - max(x)) / sum(...), in place, n >= 1. At least one x must be
// finite; -inf entries (masks) come out as 0 or within 1e-38 of it.
void Softmax(float* x, int64_t n, Isa isa = Isa::kAuto);

// y = x * sigmoid(x).
void Silu(const float* x, int64_t n, float* y, Isa isa = Isa::kAuto);

// y = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), ggml's GELU. ggml
// itself may read this from an f16 table; ours is computed directly.
void Gelu(const float* x, int64_t n, float* y, Isa isa = Isa::kAuto);

// y = silu(gate) * up: the fused gate of a SwiGLU feed-forward.
void SwiGlu(const float* gate, const float* up, int64_t n, float* y, Isa isa = Isa::kAuto);

// gpt-oss's expert gate (ggml's swiglu_oai): with g = min(gate, limit) and
// u = clamp(up, -limit, limit), y = g * sigmoid(alpha * g) * (u + 1).
// Scalar on every ISA: it runs over one expert's hidden rows per token.
void SwiGluOai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* y);

// y = a + b, y = a * b, y = x * s.
void Add(const float* a, const float* b, int64_t n, float* y, Isa isa = Isa::kAuto);
// Adds `row` (cols floats, e.g. a bias) to each of the `rows` rows of y.
void AddToRows(float* y, int64_t rows, const float* row, int64_t cols, Isa isa = Isa::kAuto);
void Mul(const float* a, const float* b, int64_t n, float* y, Isa isa = Isa::kAuto);
void Scale(const float* x, float s, int64_t n, float* y, Isa isa = Isa::kAuto);

}  // namespace waste::kernels::ops

#endif  // WASTE_DAEMON_KERNELS_OPS_OPS_H_
