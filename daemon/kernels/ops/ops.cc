#include "daemon/kernels/ops/ops.h"

#include <algorithm>
#include <cmath>

#include "common/logging.h"
#include "daemon/kernels/ops/kernels_internal.h"

namespace waste::kernels::ops {
namespace {

using internal::KernelsFor;

// In place (same pointer) is allowed; any other overlap is a caller bug
// because vector kernels read ahead of where they write.
void CheckNoPartialOverlap(const float* in, const float* out, int64_t n) {
  WCHECK(in == out || in + n <= out || out + n <= in) << "input and output partially overlap";
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* y, Isa isa) {
  WCHECK(n >= 1 && x != nullptr && y != nullptr) << "RmsNorm n=" << n;
  WCHECK(eps >= 0) << "RmsNorm eps=" << eps;
  CheckNoPartialOverlap(x, y, n);
  KernelsFor(isa).rms_norm(x, weight, n, eps, y);
}

void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n, float eps,
               float* y, Isa isa) {
  WCHECK(n >= 1 && x != nullptr && y != nullptr) << "LayerNorm n=" << n;
  WCHECK(eps >= 0) << "LayerNorm eps=" << eps;
  CheckNoPartialOverlap(x, y, n);
  KernelsFor(isa).layer_norm(x, weight, bias, n, eps, y);
}

void Softmax(float* x, int64_t n, Isa isa) {
  WCHECK(n >= 1 && x != nullptr) << "Softmax n=" << n;
  KernelsFor(isa).softmax(x, n);
}

void Silu(const float* x, int64_t n, float* y, Isa isa) {
  WCHECK(n >= 0) << "Silu n=" << n;
  if (n == 0) return;
  CheckNoPartialOverlap(x, y, n);
  KernelsFor(isa).silu(x, n, y);
}

void Gelu(const float* x, int64_t n, float* y, Isa isa) {
  WCHECK(n >= 0) << "Gelu n=" << n;
  if (n == 0) return;
  CheckNoPartialOverlap(x, y, n);
  KernelsFor(isa).gelu(x, n, y);
}

void SwiGluOai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* y) {
  WCHECK(n >= 0) << "SwiGluOai n=" << n;
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    y[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* y, Isa isa) {
  WCHECK(n >= 0) << "SwiGlu n=" << n;
  if (n == 0) return;
  CheckNoPartialOverlap(gate, y, n);
  CheckNoPartialOverlap(up, y, n);
  KernelsFor(isa).swiglu(gate, up, n, y);
}

void Add(const float* a, const float* b, int64_t n, float* y, Isa isa) {
  WCHECK(n >= 0) << "Add n=" << n;
  if (n == 0) return;
  CheckNoPartialOverlap(a, y, n);
  CheckNoPartialOverlap(b, y, n);
  KernelsFor(isa).add(a, b, n, y);
}

void AddToRows(float* y, int64_t rows, const float* row, int64_t cols, Isa isa) {
  for (int64_t r = 0; r < rows; ++r) Add(y + r * cols, row, cols, y + r * cols, isa);
}

void Mul(const float* a, const float* b, int64_t n, float* y, Isa isa) {
  WCHECK(n >= 0) << "Mul n=" << n;
  if (n == 0) return;
  CheckNoPartialOverlap(a, y, n);
  CheckNoPartialOverlap(b, y, n);
  KernelsFor(isa).mul(a, b, n, y);
}

void Scale(const float* x, float s, int64_t n, float* y, Isa isa) {
  WCHECK(n >= 0) << "Scale n=" << n;
  if (n == 0) return;
  CheckNoPartialOverlap(x, y, n);
  KernelsFor(isa).scale(x, s, n, y);
}

}  // namespace waste::kernels::ops
