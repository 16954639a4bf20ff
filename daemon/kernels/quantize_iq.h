// Quantizers of the codebook types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S), behind QuantizeRow. Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_QUANTIZE_IQ_H_
#define WASTE_DAEMON_KERNELS_QUANTIZE_IQ_H_

#include <cstdint>

#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels::internal {

// Encodes `n` floats (a multiple of 256) as a row of `type`, for which
// IsGridType() holds, into `dst`.
//
// A plain search, not llama-quantize's: per group (or 16 elements) a few
// scales are tried; for each, every 8 (IQ3: 4) values are rounded to the
// grid's levels and mapped to the codebook entry nearest that lattice point
// (a table built once per type, on first use); signs follow the values,
// and where the format keeps the count of negatives even, the cheapest
// element is flipped. Good enough for synthetic models and tests.
//
// With `importance` (n floats, see QuantizeRowWeighted) every error above
// is weighted by ElementWeights, each 8 values pick the codebook entry of
// least weighted error among the few entries nearest their lattice point,
// and each group's scale is also refit to its codes by weighted least
// squares. Without, the plain search (bit for bit as before).
void QuantizeGridRow(WeightType type, const float* src, void* dst, int64_t n,
                     const float* importance = nullptr);

// The weights of the n elements of one block from their importances:
// importance_i * sqrt(2 * mean(x^2) + x_i^2); when every importance is 0,
// the square root alone (quantize_weighted.cc).
void ElementWeights(const float* x, const float* importance, int n, float* w);

}  // namespace waste::kernels::internal

#endif  // WASTE_DAEMON_KERNELS_QUANTIZE_IQ_H_
