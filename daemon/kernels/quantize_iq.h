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
// element is flipped. Good enough for synthetic models and tests; the
// importance-weighted search is issue 11's later part.
void QuantizeGridRow(WeightType type, const float* src, void* dst, int64_t n);

}  // namespace waste::kernels::internal

#endif  // WASTE_DAEMON_KERNELS_QUANTIZE_IQ_H_
