// Plain C++ loops: the family every x86-64 machine runs, and the reference
// for the integer arithmetic the SIMD families vectorize.
#include <cmath>
#include <cstring>

#include "common/logging.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/iq_decode.h"
#include "daemon/kernels/matvec_internal.h"
#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels::internal {
namespace {

// One 32-element group of a quantized row in the form every kernel uses:
// element i of half h (16 elements) is w_i = wscale[h] * code_i + coef[h] / d
// in effect, so that with the activation x_i ~= d * qa_i,
//   dot(w, x) ~= sum_h wscale[h] * d * sum_{i in half h} code_i * qa_i
//                + coef[h] * s16[h]        (s16[h] = d * sum qa_i).
// Codes are unsigned (the weight's zero point moved into coef) so that they
// feed u8 x s8 instructions (vpmaddubsw, vpdpbusd).
struct Group {
  uint8_t codes[32];
  float wscale[2];
  float coef[2];
};

void SetScale(Group* g, float wscale, float coef) {
  g->wscale[0] = g->wscale[1] = wscale;
  g->coef[0] = g->coef[1] = coef;
}

void Nibbles(const uint8_t* qs, Group* g) {
  for (int j = 0; j < 16; ++j) {
    g->codes[j] = qs[j] & 0xF;
    g->codes[j + 16] = qs[j] >> 4;
  }
}

void FifthBits(uint32_t qh, Group* g) {
  for (int j = 0; j < 32; ++j) g->codes[j] |= ((qh >> j) & 1) << 4;
}

Group DecodeGroup(WeightType type, const uint8_t* row, int64_t gi) {
  Group g;
  switch (type) {
    case WeightType::kQ4_0: {
      const auto* b = reinterpret_cast<const BlockQ4_0*>(row) + gi;
      Nibbles(b->qs, &g);
      const float d = F16ToF32(b->d);
      SetScale(&g, d, -8 * d);
      break;
    }
    case WeightType::kQ4_1: {
      const auto* b = reinterpret_cast<const BlockQ4_1*>(row) + gi;
      Nibbles(b->qs, &g);
      SetScale(&g, F16ToF32(b->d), F16ToF32(b->m));
      break;
    }
    case WeightType::kQ5_0: {
      const auto* b = reinterpret_cast<const BlockQ5_0*>(row) + gi;
      Nibbles(b->qs, &g);
      FifthBits(LoadU32(b->qh), &g);
      const float d = F16ToF32(b->d);
      SetScale(&g, d, -16 * d);
      break;
    }
    case WeightType::kQ5_1: {
      const auto* b = reinterpret_cast<const BlockQ5_1*>(row) + gi;
      Nibbles(b->qs, &g);
      FifthBits(LoadU32(b->qh), &g);
      SetScale(&g, F16ToF32(b->d), F16ToF32(b->m));
      break;
    }
    case WeightType::kQ8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(row) + gi;
      for (int j = 0; j < 32; ++j) g.codes[j] = static_cast<uint8_t>(b->qs[j] + 128);
      const float d = F16ToF32(b->d);
      SetScale(&g, d, -128 * d);
      break;
    }
    case WeightType::kQ4_K:
    case WeightType::kQ5_K: {
      // Q5_K extends Q4_K's header (d, dmin, scales) with qh before qs.
      const bool q5 = type == WeightType::kQ5_K;
      const uint8_t* sb = row + (gi / 8) * (q5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K));
      const auto* hdr = reinterpret_cast<const BlockQ4_K*>(sb);
      const int j = gi % 8;
      const uint8_t* qs = q5 ? reinterpret_cast<const BlockQ5_K*>(sb)->qs : hdr->qs;
      for (int l = 0; l < 32; ++l) g.codes[l] = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
      if (q5) {
        const uint8_t* qh = reinterpret_cast<const BlockQ5_K*>(sb)->qh;
        for (int l = 0; l < 32; ++l) g.codes[l] |= ((qh[l] >> j) & 1) << 4;
      }
      uint8_t sc, m;
      UnpackScaleMinK4(j, hdr->scales, &sc, &m);
      SetScale(&g, F16ToF32(hdr->d) * sc, -F16ToF32(hdr->dmin) * m);
      break;
    }
    case WeightType::kQ6_K: {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(row) + gi / 8;
      const int j = gi % 8, half = j / 4, r = j % 4;
      const uint8_t* ql = b->ql + 64 * half + 32 * (r & 1);
      const uint8_t* qh = b->qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        g.codes[l] = ((ql[l] >> (4 * (r >> 1))) & 0xF) | (((qh[l] >> (2 * r)) & 3) << 4);
      }
      const float d = F16ToF32(b->d);
      for (int h = 0; h < 2; ++h) {
        g.wscale[h] = d * b->scales[2 * j + h];
        g.coef[h] = -32 * g.wscale[h];
      }
      break;
    }
    case WeightType::kQ2_K: {
      const auto* b = reinterpret_cast<const BlockQ2_K*>(row) + gi / 8;
      const int j = gi % 8;
      for (int l = 0; l < 32; ++l) g.codes[l] = (b->qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3;
      const float d = F16ToF32(b->d), dmin = F16ToF32(b->dmin);
      for (int h = 0; h < 2; ++h) {
        const uint8_t sc = b->scales[2 * j + h];
        g.wscale[h] = d * (sc & 0xF);
        g.coef[h] = -dmin * (sc >> 4);
      }
      break;
    }
    case WeightType::kQ3_K: {
      // Codes 0..7 stand for q - 4.
      const auto* b = reinterpret_cast<const BlockQ3_K*>(row) + gi / 8;
      const int j = gi % 8;
      for (int l = 0; l < 32; ++l) {
        g.codes[l] =
            ((b->qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3) | (((b->hmask[l] >> j) & 1) << 2);
      }
      const float d = F16ToF32(b->d);
      for (int h = 0; h < 2; ++h) {
        g.wscale[h] = d * UnpackScaleQ3K(2 * j + h, b->scales);
        g.coef[h] = -4 * g.wscale[h];
      }
      break;
    }
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS:
    case WeightType::kMXFP4: {
      // Codes are the table value + an offset that makes them unsigned (IQ4:
      // 128, as for Q8_0; MXFP4: kMxfp4CodeOffset).
      const int8_t* table = kIq4NlValues;
      int offset = 128;
      const uint8_t* qs;
      float scale;
      if (type == WeightType::kIQ4_NL) {
        const auto* b = reinterpret_cast<const BlockIQ4_NL*>(row) + gi;
        qs = b->qs;
        scale = F16ToF32(b->d);
      } else if (type == WeightType::kMXFP4) {
        const auto* b = reinterpret_cast<const BlockMXFP4*>(row) + gi;
        qs = b->qs;
        scale = E8M0HalfToF32(b->e);
        table = kMxfp4Values;
        offset = kMxfp4CodeOffset;
      } else {
        const auto* b = reinterpret_cast<const BlockIQ4_XS*>(row) + gi / 8;
        qs = b->qs + 16 * (gi % 8);
        scale = F16ToF32(b->d) * UnpackScaleIQ4XS(gi % 8, *b);
      }
      for (int j = 0; j < 16; ++j) {
        g.codes[j] = static_cast<uint8_t>(table[qs[j] & 0xF] + offset);
        g.codes[j + 16] = static_cast<uint8_t>(table[qs[j] >> 4] + offset);
      }
      SetScale(&g, scale, -offset * scale);
      break;
    }
    case WeightType::kIQ2_XXS:
    case WeightType::kIQ2_XS:
    case WeightType::kIQ2_S:
    case WeightType::kIQ3_XXS:
    case WeightType::kIQ3_S:
    case WeightType::kIQ1_S:
    case WeightType::kIQ1_M: {
      // int8 codes + 128, as for Q8_0.
      const int block_bytes = GetWeightTypeInfo(type).block_bytes;
      const IqGroup r = DecodeIqGroup(type, row + (gi / 8) * block_bytes, gi % 8);
      for (int e = 0; e < 32; ++e)
        g.codes[e] = static_cast<uint8_t>((r.q[e / 8] >> (8 * (e % 8))) ^ 0x80);
      for (int h = 0; h < 2; ++h) {
        g.wscale[h] = r.scale[h];
        g.coef[h] = -128 * r.scale[h];
      }
      break;
    }
    default:
      std::memset(&g, 0, sizeof(g));
  }
  return g;
}

float DotF32Ref(WeightType type, const void* row, const float* x, int64_t cols) {
  float buf[256];
  float sum = 0;
  const int64_t elem_bytes = GetWeightTypeInfo(type).block_bytes;
  for (int64_t c = 0; c < cols; c += 256) {
    const int64_t n = cols - c < 256 ? cols - c : 256;
    DequantizeRow(type, static_cast<const uint8_t*>(row) + c * elem_bytes, buf, n);
    for (int64_t i = 0; i < n; ++i) sum += buf[i] * x[c + i];
  }
  return sum;
}

void RowsScalar(const RowsTask& t, int64_t begin, int64_t end) {
  const bool quantized = UsesQuantizedActivations(t.w.type);
  const int64_t grouped = InterleavedRows(t.w);
  for (int64_t r = begin; r < end; ++r) {
    const uint8_t* row = RowStart(t.w, r);
    for (int64_t b = 0; b < t.batch; ++b) {
      float y;
      if (r < grouped) {
        y = DotGroupsInterleavedRef(t.w.type, t.w.layout, row, InterleavedUnitStride(t.w.type), 0,
                                    t.w.cols / 32, t.acts[b]);
      } else if (quantized) {
        y = DotGroupsRef(t.w.type, row, 0, t.w.cols / 32, t.acts[b]);
      } else {
        y = DotF32Ref(t.w.type, row, t.x + b * t.x_stride, t.w.cols);
      }
      t.y[b * t.y_stride + r] = y;
    }
  }
}

// The sum DotGroupsRef describes, each group decoded by decode(gi).
template <typename DecodeFn>
float DotGroups(int64_t g_begin, int64_t g_end, const QuantizedActs& acts, DecodeFn decode) {
  float sum = 0;
  for (int64_t gi = g_begin; gi < g_end; ++gi) {
    const Group g = decode(gi);
    const int8_t* qa = acts.qs + 32 * gi;
    for (int h = 0; h < 2; ++h) {
      int32_t idot = 0;
      for (int l = 16 * h; l < 16 * h + 16; ++l) idot += g.codes[l] * qa[l];
      sum += g.wscale[h] * acts.d[gi] * idot + g.coef[h] * acts.s16[2 * gi + h];
    }
  }
  return sum;
}

}  // namespace

float DotGroupsRef(WeightType type, const void* row, int64_t g_begin, int64_t g_end,
                   const QuantizedActs& acts) {
  return DotGroups(g_begin, g_end, acts, [&](int64_t gi) {
    return DecodeGroup(type, static_cast<const uint8_t*>(row), gi);
  });
}

float DotBlocksSequentialRef(WeightType type, const void* row, int64_t cols,
                             const QuantizedActs& acts) {
  const bool with_min = type == WeightType::kQ4_K || type == WeightType::kQ5_K ||
                        type == WeightType::kQ4_1 || type == WeightType::kQ5_1;
  const bool parts = type == WeightType::kQ6_K;
  const bool table =
      type == WeightType::kIQ4_NL || type == WeightType::kIQ4_XS || type == WeightType::kMXFP4;
  WCHECK(type == WeightType::kQ8_0 || type == WeightType::kQ4_0 || type == WeightType::kQ5_0 ||
         with_min || parts || table)
      << "no matrix-unit arithmetic for type " << static_cast<int>(type);
  // DecodeGroup's unsigned codes less the zero point (the types with a min
  // take it through s32 instead): the signed codes the matrix unit
  // multiplies (the table types: their values).
  const int zero = type == WeightType::kQ8_0    ? 128
                   : type == WeightType::kQ4_0  ? 8
                   : type == WeightType::kQ5_0  ? 16
                   : parts                      ? 32
                   : type == WeightType::kMXFP4 ? kMxfp4CodeOffset
                   : table                      ? 128
                                                : 0;
  // Q6_K's scale changes every 16 elements: a block is two parts in order.
  const int part_len = parts ? kQK32 / 2 : kQK32;
  float acc = 0;
  for (int64_t b = 0; b < cols / kQK32; ++b) {
    const Group g = DecodeGroup(type, static_cast<const uint8_t*>(row), b);
    for (int p = 0; p < kQK32 / part_len; ++p) {
      int32_t dot = 0;
      for (int i = p * part_len; i < (p + 1) * part_len; ++i)
        dot += (g.codes[i] - zero) * acts.qs[kQK32 * b + i];
      acc = std::fma(static_cast<float>(dot), g.wscale[p] * acts.d[b], acc);
    }
    if (with_min) acc = std::fma(g.coef[0], acts.s32[b], acc);
  }
  return acc;
}

void UninterleaveUnit(WeightType type, WeightLayout layout, const uint8_t* unit,
                      uint8_t* file_bytes) {
  if (type == WeightType::kQ4_K && layout == WeightLayout::kInterleaved) {
    std::memcpy(file_bytes, unit, sizeof(BlockQ4_K));
    return;
  }
  if (type == WeightType::kQ4_K) {
    std::memcpy(file_bytes, unit, kQ4KHeaderBytes);
    uint8_t* qs = file_bytes + kQ4KHeaderBytes;
    std::memset(qs, 0, sizeof(BlockQ4_K::qs));
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        const int g = Q4KLaneGroup(j);
        for (int b = 0; b < 4; ++b) {
          const int code =
              (unit[kQ4KHeaderBytes + 32 * (i % 4) + 4 * j + b] >> (4 * (i / 4))) & 0xF;
          qs[32 * (g / 2) + Q4KLaneElem(i, j, b)] |= static_cast<uint8_t>(code << (4 * (g % 2)));
        }
      }
    }
    return;
  }
  if (type == WeightType::kIQ4_XS) {  // kInterleavedLanes.
    constexpr int kHeader = LaneHeaderBytes(WeightType::kIQ4_XS);
    std::memcpy(file_bytes, unit, kHeader);
    for (int j = 0; j < 8; ++j) {
      for (int i = 0; i < 16; ++i)
        file_bytes[kHeader + 16 * j + i] = unit[kHeader + LaneCodeByte(j, i)];
    }
    return;
  }
  if (type == WeightType::kMXFP4) {  // kInterleavedLanes: the exponents, then the codes.
    for (int j = 0; j < 8; ++j) {
      uint8_t* block = file_bytes + sizeof(BlockMXFP4) * j;
      block[0] = unit[j];
      for (int i = 0; i < 16; ++i) block[1 + i] = unit[LaneHeaderBytes(type) + LaneCodeByte(j, i)];
    }
    return;
  }
  if (layout == WeightLayout::kInterleavedLanes) {  // Q4_0, IQ4_NL.
    for (int j = 0; j < 8; ++j) {
      uint8_t* block = file_bytes + sizeof(BlockQ4_0) * j;
      std::memcpy(block, unit + 2 * j, 2);
      for (int i = 0; i < 16; ++i) block[2 + i] = unit[Q4_0LaneByte(j, i)];
    }
    return;
  }
  // Q4_0, Q8_0: 8 blocks of an f16 scale and their quants.
  const int block_bytes = GetWeightTypeInfo(type).block_bytes;
  const int qs_bytes = block_bytes - kUnitScaleBytes / 8;
  for (int j = 0; j < 8; ++j) {
    std::memcpy(file_bytes + block_bytes * j, unit + 2 * j, 2);
    std::memcpy(file_bytes + block_bytes * j + 2, unit + kUnitScaleBytes + qs_bytes * j, qs_bytes);
  }
}

float DotGroupsInterleavedRef(WeightType type, WeightLayout layout, const uint8_t* row,
                              int64_t unit_stride, int64_t g_begin, int64_t g_end,
                              const QuantizedActs& acts) {
  return DotGroups(g_begin, g_end, acts, [&](int64_t gi) {
    // The group's unit put back together as GGUF has it.
    uint8_t file_bytes[8 * sizeof(BlockQ8_0)];
    UninterleaveUnit(type, layout, row + gi / 8 * unit_stride, file_bytes);
    return DecodeGroup(type, file_bytes, gi % 8);
  });
}

const IsaKernels& ScalarKernels() {
  static constexpr IsaKernels kKernels = {
      +[](WeightType, const float* x, int64_t cols, const QuantizedActs& out) {
        QuantizeActsRef(x, cols, out);
      },
      &RowsScalar};
  return kKernels;
}

}  // namespace waste::kernels::internal
