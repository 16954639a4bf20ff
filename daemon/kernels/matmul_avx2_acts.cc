// The activation side of the register-tiled AVX2 loops (matmul_avx2.cc):
// each vector quantized once per call and laid out in the lane order of the
// weight type's code vectors. Compiled with AVX2_COPTS.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "daemon/kernels/avx2_inline.h"
#include "daemon/kernels/matvec_avx2_internal.h"
#include "daemon/kernels/matvec_internal.h"

namespace waste::kernels::internal::WASTE_AVX2_NS::tiled {
namespace {

// Which block lane j holds, and which 4 elements of it codes[i] holds there:
// qp of the activation is laid out to match.
struct LaneMap {
  std::array<int, 8> block;
  std::array<std::array<int, 8>, 8> quad;  // [i][j]
};

constexpr LaneMap kNaturalMap = [] {
  LaneMap m{};
  for (int j = 0; j < 8; ++j) {
    m.block[j] = j;
    for (int i = 0; i < 8; ++i) m.quad[i][j] = i;
  }
  return m;
}();

// Q2_K, Q3_K: lane j group j, code vector i its dword 4 (i / 4) + (j % 4 +
// i % 4) % 4 (see Q23K).
constexpr LaneMap kQ23KMap = [] {
  LaneMap m{};
  for (int j = 0; j < 8; ++j) {
    m.block[j] = j;
    for (int i = 0; i < 8; ++i) m.quad[i][j] = 4 * (i / 4) + (j % 4 + i % 4) % 4;
  }
  return m;
}();

// Q4_K: lanes 0-3 the low-nibble groups 0, 2, 4, 6, lanes 4-7 the high ones
// (the order the kInterleaved layout keeps its codes in).
constexpr LaneMap kQ4KMap = [] {
  LaneMap m{};
  for (int j = 0; j < 8; ++j) {
    m.block[j] = Q4KLaneGroup(j);
    for (int i = 0; i < 8; ++i) m.quad[i][j] = Q4KLaneElem(i, j, 0) / 4;
  }
  return m;
}();

// Q3_K's zero point (codes are q + 4) as integers: per unit and half h of
// its 8 groups, 4 x the sum of the activation's 16 qs there, in lane j (AVX2:
// the low word of lane j, beside the int16 sums of the half's products) of
// zs + 16 un + 8 h, which SumTile16 subtracts before the half's scales.
// (Rows of Q3_K are whole units.)
void Q3KZeroPoints(int64_t cols, const QuantizedActs& out) {
  for (int64_t un = 0; un < cols / 256; ++un) {
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 8; ++j) {
        const int8_t* q = out.qs + 256 * un + 32 * j + 16 * h;
        int32_t sum = 0;
        for (int e = 0; e < 16; ++e) sum += q[e];
        out.zs[16 * un + 8 * h + j] =
            kVnni ? 4 * sum : static_cast<uint16_t>(static_cast<int16_t>(4 * sum));
      }
    }
  }
}

}  // namespace

// The natural arrays as every AVX2 loop has them (QuantizeBlocks), then
// per unit qp, ds and zs in the type's lane order.
void QuantizeActsTiled(WeightType type, const float* x, int64_t cols, const QuantizedActs& out) {
  const LaneMap& map = type == WeightType::kQ4_K                                ? kQ4KMap
                       : type == WeightType::kQ2_K || type == WeightType::kQ3_K ? kQ23KMap
                                                                                : kNaturalMap;
  const int zero_point = type == WeightType::kQ4_0 ? kQ4_0ZeroPoint : -TableCodeOffset(type);
  // The block sums land in zs (one per block, as zs has one per lane), and
  // each unit's 8 are copied out before their lane-order values replace them.
  // The groups past the last whole unit (the 32-element-block types) make one
  // more unit, its absent blocks zeros, which the loops run as a partial unit.
  QuantizeBlocks(x, cols, out, out.zs);
  const int64_t groups = cols / 32;
  for (int64_t un = 0; un < (groups + 7) / 8; ++un) {
    auto present = [&](int j) { return 8 * un + map.block[j] < groups; };
    int32_t isum[8] = {};
    std::memcpy(isum, out.zs + 8 * un, std::min<int64_t>(8, groups - 8 * un) * sizeof(int32_t));
    for (int j = 0; j < 8; ++j) {
      out.ds[8 * un + j] = present(j) ? out.d[8 * un + map.block[j]] : 0;
      out.zs[8 * un + j] = present(j) ? zero_point * isum[map.block[j]] : 0;
    }
    const int8_t* src = out.qs + 256 * un;
    int8_t* dst = out.qp + 256 * un;
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        if (present(j)) {
          std::memcpy(dst + 32 * i + 4 * j, src + 32 * map.block[j] + 4 * map.quad[i][j], 4);
        } else {
          std::memset(dst + 32 * i + 4 * j, 0, 4);
        }
      }
    }
  }
  if (type == WeightType::kQ3_K) Q3KZeroPoints(cols, out);
}

}  // namespace waste::kernels::internal::WASTE_AVX2_NS::tiled
