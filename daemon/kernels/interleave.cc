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

namespace {

// One type's loop: the block size a constant, so that the copies are a few
// moves each (with library memcpy calls, 1 GB of Q8_0 took ~1 s).
template <typename Block>
void InterleaveBlocks(int64_t rows, int64_t cols, uint8_t* base) {
  // A block is an f16 scale and then its quants.
  static_assert(offsetof(Block, qs) == sizeof(Half));
  constexpr int kQsBytes = sizeof(Block::qs);
  constexpr int64_t kUnitBytes = 8 * sizeof(Block);
  const int64_t row_bytes = cols / kQK32 * sizeof(Block);
  std::vector<uint8_t> group(kInterleaveRows * row_bytes);
  for (int64_t r0 = 0; r0 + kInterleaveRows <= rows; r0 += kInterleaveRows) {
    uint8_t* out = base + r0 * row_bytes;
    std::memcpy(group.data(), out, group.size());
    for (int64_t u = 0; u < cols / 256; ++u) {
      for (int i = 0; i < kInterleaveRows; ++i) {
        uint8_t* unit = out + (u * kInterleaveRows + i) * kUnitBytes;
        const uint8_t* blocks = group.data() + i * row_bytes + u * kUnitBytes;
        for (int j = 0; j < 8; ++j) {
          std::memcpy(unit + sizeof(Half) * j, blocks + j * sizeof(Block), sizeof(Half));
          std::memcpy(unit + internal::kUnitScaleBytes + j * kQsBytes,
                      blocks + j * sizeof(Block) + sizeof(Half), kQsBytes);
        }
      }
    }
  }
}

}  // namespace

void InterleaveRows(WeightType type, int64_t rows, int64_t cols, void* data) {
  WCHECK(CanInterleave(type, cols)) << "cannot interleave a " << GetWeightTypeInfo(type).name
                                    << " matrix of " << cols << " columns";
  static_assert(internal::kUnitScaleBytes == 8 * sizeof(Half));
  auto* base = static_cast<uint8_t*>(data);
  if (type == WeightType::kQ4_0) return InterleaveBlocks<BlockQ4_0>(rows, cols, base);
  InterleaveBlocks<BlockQ8_0>(rows, cols, base);
}

}  // namespace waste::kernels
