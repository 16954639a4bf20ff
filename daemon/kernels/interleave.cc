// InterleaveRows: GGUF's rows rewritten into the kInterleaved layout (see
// WeightLayout in matvec.h), once per matrix at load.
#include <cstddef>
#include <cstring>
#include <vector>

#include "common/logging.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels {

bool CanInterleave(WeightType type, int64_t cols) {
  return (type == WeightType::kQ4_0 || type == WeightType::kQ8_0) && cols > 0 && cols % 256 == 0;
}

void InterleaveRows(WeightType type, int64_t rows, int64_t cols, void* data) {
  WCHECK(CanInterleave(type, cols)) << "cannot interleave a " << GetWeightTypeInfo(type).name
                                    << " matrix of " << cols << " columns";
  // Both types' blocks are an f16 scale and then their quants.
  static_assert(offsetof(BlockQ4_0, qs) == 2 && offsetof(BlockQ8_0, qs) == 2);
  const int block_bytes = GetWeightTypeInfo(type).block_bytes;
  const int qs_bytes = block_bytes - 2;
  const int64_t row_bytes = RowBytes(type, cols);
  const int64_t unit_bytes = internal::UnitBytes(type);
  std::vector<uint8_t> group(kInterleaveRows * row_bytes);
  auto* base = static_cast<uint8_t*>(data);
  for (int64_t r0 = 0; r0 + kInterleaveRows <= rows; r0 += kInterleaveRows) {
    uint8_t* out = base + r0 * row_bytes;
    std::memcpy(group.data(), out, group.size());
    for (int64_t u = 0; u < cols / 256; ++u) {
      for (int i = 0; i < kInterleaveRows; ++i) {
        uint8_t* unit = out + (u * kInterleaveRows + i) * unit_bytes;
        const uint8_t* blocks = group.data() + i * row_bytes + u * unit_bytes;
        for (int j = 0; j < 8; ++j) {
          std::memcpy(unit + 2 * j, blocks + j * block_bytes, 2);
          std::memcpy(unit + internal::kUnitScaleBytes + j * qs_bytes, blocks + j * block_bytes + 2,
                      qs_bytes);
        }
      }
    }
  }
}

}  // namespace waste::kernels
