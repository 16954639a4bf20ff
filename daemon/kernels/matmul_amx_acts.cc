// The matrix-unit loops' activation tiles (see amx::PrepareActs): plain C++,
// once per MatMul, a small cost beside the product.
#include <algorithm>
#include <cstring>

#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels::internal::amx {

size_t ActsBytes(int64_t cols, int64_t batch) {
  return static_cast<size_t>((batch + kTile - 1) / kTile * (cols / kQK32)) * kActsBlockBytes;
}

void PrepareActs(const QuantizedActs* acts, int64_t batch, int64_t cols, uint8_t* out) {
  const int64_t blocks = cols / kQK32;
  for (int64_t v0 = 0; v0 < batch; v0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, batch - v0));
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* tile = out + (v0 / kTile * blocks + b) * kActsBlockBytes;
      std::memset(tile, 0, kActsBlockBytes);
      auto* scales = reinterpret_cast<float*>(tile + kActsTileBytes);
      for (int j = 0; j < n; ++j) {
        const int8_t* q = acts[v0 + j].qs + b * kQK32;
        for (int k = 0; k < kQK32 / 4; ++k) std::memcpy(tile + 64 * k + 4 * j, q + 4 * k, 4);
        scales[j] = acts[v0 + j].d[b];
        scales[kTile + j] = acts[v0 + j].s32[b];
      }
    }
  }
}

}  // namespace waste::kernels::internal::amx
