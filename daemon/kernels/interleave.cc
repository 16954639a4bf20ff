// InterleaveRows: GGUF's rows rewritten into the kInterleaved layout (see
// WeightLayout in matvec.h), once per matrix at load.
#include <cstddef>
#include <cstring>
#include <vector>

#include "common/logging.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels {

bool CanInterleave(WeightType type, int64_t cols, WeightLayout layout) {
  if (cols <= 0 || cols % 256 != 0) return false;
  switch (layout) {
    case WeightLayout::kRows:
      return true;
    case WeightLayout::kInterleaved:
      return type == WeightType::kQ4_0 || type == WeightType::kQ8_0 || type == WeightType::kQ4_K;
    case WeightLayout::kInterleavedLanes:
      return type == WeightType::kQ4_0 || type == WeightType::kQ4_K ||
             type == WeightType::kIQ4_NL || type == WeightType::kIQ4_XS ||
             type == WeightType::kMXFP4;
  }
  return false;
}

WeightLayout InterleavedLayoutFor(WeightType type, Isa isa) {
  // The AVX-512 loop would have to gather re-paired codes back (in cache on
  // one core 24 against 28 GB/s plain, and 31-33 with GGUF's pairing
  // interleaved); the AVX2 loop saves its transposes (Q4_K 19.5 -> 23 GB/s;
  // Q4_0, Zen 5, 35 -> 46, AVX-VNNI 39 -> 49).
  // IQ4_NL, IQ4_XS and MXFP4: their table loop loses the same transposes
  // (and IQ4_NL's and MXFP4's scale gathers): see matmul_avx2_table.cc.
  if (IsAvx2Family(isa) && CanInterleave(type, 256, WeightLayout::kInterleavedLanes)) {
    return WeightLayout::kInterleavedLanes;
  }
  return WeightLayout::kInterleaved;
}

WeightLayout ResidentLayoutFor(WeightType type, int64_t cols, Isa isa) {
  const WeightLayout layout = InterleavedLayoutFor(type, isa);
  if (!CanInterleave(type, cols, layout)) return WeightLayout::kRows;
  // Q8_0 repacked decoded slower on AVX-512 (1.1B llama, resident, quiet
  // Zen 5: 38.2 and 39.0 tok/s against 43.6 and 40.1 plain); on AVX2 it
  // was faster. Q4_0 gained on both (AVX-512 67.0/71.1 against 61.4/67.6).
  // Q4_K on AVX-512 (whose group loop then ran its unit step out of line:
  // since that was fixed, 123-127 against 118-126 tok/s, within noise) stays
  // plain; on AVX2 (2-core Zen 4 shared with builds, medians of 10
  // alternating runs of the 1.1B llama) decode 67.3 against 65.9 tok/s quiet
  // (29.8 against 25.8 loaded), prefill 124 against 120.
  if (isa == Isa::kAvx512 && (type == WeightType::kQ8_0 || type == WeightType::kQ4_K)) {
    return WeightLayout::kRows;
  }
  return layout;
}

namespace {

// Rewrites each whole group of kInterleaveRows rows so that unit u of its row
// i lands at unit u * kInterleaveRows + i of the group, written by
// pack(unit, file_bytes). The unit size a constant, so that the copies are a
// few moves each (with library memcpy calls, 1 GB of Q8_0 took ~1 s).
template <int64_t kUnitBytes, typename PackFn>
void InterleaveUnits(int64_t rows, int64_t cols, uint8_t* base, PackFn pack) {
  const int64_t row_bytes = cols / 256 * kUnitBytes;
  std::vector<uint8_t> group(kInterleaveRows * row_bytes);
  for (int64_t r0 = 0; r0 + kInterleaveRows <= rows; r0 += kInterleaveRows) {
    uint8_t* out = base + r0 * row_bytes;
    std::memcpy(group.data(), out, group.size());
    for (int64_t u = 0; u < cols / 256; ++u) {
      for (int i = 0; i < kInterleaveRows; ++i) {
        pack(out + (u * kInterleaveRows + i) * kUnitBytes,
             group.data() + i * row_bytes + u * kUnitBytes);
      }
    }
  }
}

// The legacy types: a unit is 8 blocks, each an f16 scale and then its quants.
template <typename Block>
void InterleaveBlocks(int64_t rows, int64_t cols, uint8_t* base) {
  static_assert(offsetof(Block, qs) == sizeof(Half));
  constexpr int kQsBytes = sizeof(Block::qs);
  InterleaveUnits<8 * sizeof(Block)>(rows, cols, base, [](uint8_t* unit, const uint8_t* blocks) {
    for (int j = 0; j < 8; ++j) {
      std::memcpy(unit + sizeof(Half) * j, blocks + j * sizeof(Block), sizeof(Half));
      std::memcpy(unit + internal::kUnitScaleBytes + j * kQsBytes,
                  blocks + j * sizeof(Block) + sizeof(Half), kQsBytes);
    }
  });
}

// Q4_K in kInterleavedLanes: the header as it is, the codes re-paired
// (Q4KLaneElem).
void InterleaveQ4KLanes(int64_t rows, int64_t cols, uint8_t* base) {
  using internal::kQ4KHeaderBytes;
  static_assert(offsetof(BlockQ4_K, qs) == kQ4KHeaderBytes);
  InterleaveUnits<sizeof(BlockQ4_K)>(rows, cols, base, [](uint8_t* unit, const uint8_t* block) {
    std::memcpy(unit, block, kQ4KHeaderBytes);
    const uint8_t* qs = block + kQ4KHeaderBytes;
    auto code = [qs](int group, int elem) {
      return (qs[32 * (group / 2) + elem] >> (4 * (group % 2))) & 0xF;
    };
    for (int c = 0; c < 4; ++c) {
      for (int j = 0; j < 8; ++j) {
        const int g = internal::Q4KLaneGroup(j);
        for (int b = 0; b < 4; ++b) {
          unit[kQ4KHeaderBytes + 32 * c + 4 * j + b] =
              static_cast<uint8_t>(code(g, internal::Q4KLaneElem(c, j, b)) |
                                   code(g, internal::Q4KLaneElem(c + 4, j, b)) << 4);
        }
      }
    }
  });
}

// Q4_0 and IQ4_NL in kInterleavedLanes: the 8 scales as in kInterleaved,
// then the quants dword-transposed (Q4_0LaneByte).
template <typename Block>
void InterleaveBlockLanes(int64_t rows, int64_t cols, uint8_t* base) {
  static_assert(sizeof(Block) == sizeof(BlockQ4_0) && offsetof(Block, qs) == sizeof(Half));
  InterleaveUnits<8 * sizeof(Block)>(rows, cols, base, [](uint8_t* unit, const uint8_t* blocks) {
    for (int j = 0; j < 8; ++j) {
      const auto* b = reinterpret_cast<const Block*>(blocks) + j;
      std::memcpy(unit + sizeof(Half) * j, &b->d, sizeof(Half));
      for (int c = 0; c < 4; ++c)
        std::memcpy(unit + internal::Q4_0LaneByte(j, 4 * c), b->qs + 4 * c, 4);
    }
  });
}

// IQ4_XS and MXFP4 in kInterleavedLanes: an 8-byte header (IQ4_XS's own,
// MXFP4's 8 exponents), then the 8 groups' 16 code bytes dword-transposed
// (LaneCodeByte).
template <WeightType kType>
void InterleaveHeaderLanes(int64_t rows, int64_t cols, uint8_t* base) {
  constexpr int kHeader = internal::LaneHeaderBytes(kType);
  constexpr bool kXs = kType == WeightType::kIQ4_XS;
  static_assert(kHeader == 8 && offsetof(BlockIQ4_XS, qs) == kHeader);
  static_assert(sizeof(BlockIQ4_XS) == 8 * sizeof(BlockMXFP4));
  InterleaveUnits<sizeof(BlockIQ4_XS)>(rows, cols, base, [](uint8_t* unit, const uint8_t* file) {
    for (int j = 0; j < 8; ++j) {
      const uint8_t* qs = kXs ? file + kHeader + 16 * j : file + sizeof(BlockMXFP4) * j + 1;
      unit[j] = kXs ? file[j] : file[sizeof(BlockMXFP4) * j];
      for (int c = 0; c < 4; ++c) {
        std::memcpy(unit + kHeader + internal::LaneCodeByte(j, 4 * c), qs + 4 * c, 4);
      }
    }
  });
}

}  // namespace

void InterleaveRows(WeightType type, int64_t rows, int64_t cols, void* data, WeightLayout layout) {
  WCHECK(layout != WeightLayout::kRows && CanInterleave(type, cols, layout))
      << "cannot interleave a " << GetWeightTypeInfo(type).name << " matrix of " << cols
      << " columns as layout " << static_cast<int>(layout);
  static_assert(internal::kUnitScaleBytes == 8 * sizeof(Half));
  auto* base = static_cast<uint8_t*>(data);
  if (layout == WeightLayout::kInterleavedLanes) {
    switch (type) {
      case WeightType::kQ4_0:
        return InterleaveBlockLanes<BlockQ4_0>(rows, cols, base);
      case WeightType::kIQ4_NL:
        return InterleaveBlockLanes<BlockIQ4_NL>(rows, cols, base);
      case WeightType::kIQ4_XS:
        return InterleaveHeaderLanes<WeightType::kIQ4_XS>(rows, cols, base);
      case WeightType::kMXFP4:
        return InterleaveHeaderLanes<WeightType::kMXFP4>(rows, cols, base);
      default:
        return InterleaveQ4KLanes(rows, cols, base);
    }
  }
  if (type == WeightType::kQ4_K) {
    return InterleaveUnits<sizeof(BlockQ4_K)>(
        rows, cols, base,
        [](uint8_t* unit, const uint8_t* block) { std::memcpy(unit, block, sizeof(BlockQ4_K)); });
  }
  if (type == WeightType::kQ4_0) return InterleaveBlocks<BlockQ4_0>(rows, cols, base);
  InterleaveBlocks<BlockQ8_0>(rows, cols, base);
}

}  // namespace waste::kernels
