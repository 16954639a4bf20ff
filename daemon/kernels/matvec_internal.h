// The interface between matvec.cc (validation, activation quantization,
// threading) and the per-ISA loops in matvec_{scalar,avx2,avx512}.cc.
// Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_MATVEC_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_MATVEC_INTERNAL_H_

#include <cstdint>

#include "daemon/kernels/matvec.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels::internal {

// One MatMul, already validated: rows [begin, end) are the unit of work.
struct RowsTask {
  WeightView w;
  int64_t batch = 1;
  const float* x = nullptr;  // f32 activations, for F32/F16/BF16 weights.
  int64_t x_stride = 0;
  const QuantizedActs* acts = nullptr;  // [batch], for the quantized types.
  float* y = nullptr;
  int64_t y_stride = 0;
};

struct IsaKernels {
  // Quantizes one activation vector (cols a multiple of 32) for a dot with
  // weights of `type` (the AVX-512 loops read it in a per-type order).
  void (*quantize_acts)(WeightType type, const float* x, int64_t cols, const QuantizedActs& out);
  // y for rows [begin, end) of the task, all batch entries.
  void (*rows)(const RowsTask& task, int64_t begin, int64_t end);
};

const IsaKernels& ScalarKernels();
const IsaKernels& Avx2Kernels();
const IsaKernels& Avx512Kernels();

// The integer dot of the quantized types, one 32-element group at a time, in
// plain C++: the reference the SIMD loops implement, and their tail for rows
// whose length is not a multiple of their unroll. Returns
//   sum over groups g in [g_begin, g_end) of dot(weights of g, acts of g).
// `row` points at the row start; group g covers elements [32g, 32g + 32).
float DotGroupsRef(WeightType type, const void* row, int64_t g_begin, int64_t g_end,
                   const QuantizedActs& acts);

}  // namespace waste::kernels::internal

#endif  // WASTE_DAEMON_KERNELS_MATVEC_INTERNAL_H_
