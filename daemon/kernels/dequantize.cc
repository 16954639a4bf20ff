#include "daemon/kernels/dequantize.h"

#include <cstring>

#include "common/logging.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/iq_decode.h"
#include "daemon/kernels/quant_blocks.h"

namespace waste::kernels {
namespace {

void DequantQ4_0(const BlockQ4_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * ((b[i].qs[j] & 0xF) - 8);
      y[j + 16] = d * ((b[i].qs[j] >> 4) - 8);
    }
  }
}

void DequantQ4_1(const BlockQ4_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = F16ToF32(b[i].d);
    const float m = F16ToF32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * (b[i].qs[j] & 0xF) + m;
      y[j + 16] = d * (b[i].qs[j] >> 4) + m;
    }
  }
}

void DequantQ5_0(const BlockQ5_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = F16ToF32(b[i].d);
    const uint32_t qh = LoadU32(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
      const int hi = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = d * (lo - 16);
      y[j + 16] = d * (hi - 16);
    }
  }
}

void DequantQ5_1(const BlockQ5_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = F16ToF32(b[i].d);
    const float m = F16ToF32(b[i].m);
    const uint32_t qh = LoadU32(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
      const int hi = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = d * lo + m;
      y[j + 16] = d * hi + m;
    }
  }
}

void DequantQ8_0(const BlockQ8_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK32; ++j) y[j] = d * b[i].qs[j];
  }
}

void DequantQ4_K(const BlockQ4_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    const float dmin = F16ToF32(b[i].dmin);
    for (int j = 0; j < 8; ++j, y += 32) {
      uint8_t sc, m;
      UnpackScaleMinK4(j, b[i].scales, &sc, &m);
      const uint8_t* q = b[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) y[l] = d * sc * ((q[l] >> shift) & 0xF) - dmin * m;
    }
  }
}

void DequantQ5_K(const BlockQ5_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    const float dmin = F16ToF32(b[i].dmin);
    for (int j = 0; j < 8; ++j, y += 32) {
      uint8_t sc, m;
      UnpackScaleMinK4(j, b[i].scales, &sc, &m);
      const uint8_t* q = b[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0xF) | (((b[i].qh[l] >> j) & 1) << 4);
        y[l] = d * sc * v - dmin * m;
      }
    }
  }
}

void DequantQ6_K(const BlockQ6_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      const int8_t* sc = b[i].scales + 8 * half;
      for (int r = 0; r < 4; ++r, y += 32) {
        for (int l = 0; l < 32; ++l) {
          const int low = (ql[l + 32 * (r & 1)] >> (4 * (r >> 1))) & 0xF;
          const int high = (qh[l] >> (2 * r)) & 3;
          y[l] = d * sc[2 * r + l / 16] * ((low | (high << 4)) - 32);
        }
      }
    }
  }
}

// The scale products below are formed in ggml's order, (d * scale) * code:
// for IQ4_XS that product can round, and the order decides how.
void DequantQ2_K(const BlockQ2_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    const float dmin = F16ToF32(b[i].dmin);
    for (int g = 0; g < 8; ++g) {
      const uint8_t* q = b[i].qs + 32 * (g / 4);
      const int shift = 2 * (g % 4);
      for (int h = 0; h < 2; ++h, y += 16) {
        const uint8_t sc = b[i].scales[2 * g + h];
        const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) y[l] = dl * ((q[16 * h + l] >> shift) & 3) - ml;
      }
    }
  }
}

void DequantQ3_K(const BlockQ3_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int g = 0; g < 8; ++g) {
      const uint8_t* q = b[i].qs + 32 * (g / 4);
      const int shift = 2 * (g % 4);
      for (int h = 0; h < 2; ++h, y += 16) {
        const float dl = d * UnpackScaleQ3K(2 * g + h, b[i].scales);
        for (int l = 16 * h; l < 16 * h + 16; ++l) {
          const int code = ((q[l] >> shift) & 3) | (((b[i].hmask[l] >> g) & 1) << 2);
          y[l - 16 * h] = dl * (code - 4);
        }
      }
    }
  }
}

void DequantIQ4_NL(const BlockIQ4_NL* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIq4NlValues[b[i].qs[j] & 0xF];
      y[j + 16] = d * kIq4NlValues[b[i].qs[j] >> 4];
    }
  }
}

void DequantMXFP4(const BlockMXFP4* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = E8M0HalfToF32(b[i].e);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kMxfp4Values[b[i].qs[j] & 0xF];
      y[j + 16] = d * kMxfp4Values[b[i].qs[j] >> 4];
    }
  }
}

void DequantIQ4_XS(const BlockIQ4_XS* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int g = 0; g < 8; ++g, y += 32) {
      const float dl = d * UnpackScaleIQ4XS(g, b[i]);
      const uint8_t* qs = b[i].qs + 16 * g;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIq4NlValues[qs[j] & 0xF];
        y[j + 16] = dl * kIq4NlValues[qs[j] >> 4];
      }
    }
  }
}

// The codebook types through their group decoder (iq_decode.h): its scale *
// code products are exactly ggml's values.
void DequantGrid(WeightType type, const uint8_t* src, int64_t nb, float* y) {
  const int block_bytes = GetWeightTypeInfo(type).block_bytes;
  for (int64_t i = 0; i < nb; ++i) {
    for (int g = 0; g < 8; ++g, y += 32) {
      const IqGroup r = DecodeIqGroup(type, src + i * block_bytes, g);
      for (int e = 0; e < 32; ++e) {
        y[e] = r.scale[e / 16] * static_cast<int8_t>(r.q[e / 8] >> (8 * (e % 8)));
      }
    }
  }
}

}  // namespace

void DequantizeRow(WeightType type, const void* src, float* dst, int64_t n) {
  const WeightTypeInfo info = GetWeightTypeInfo(type);
  WCHECK(info.block_elems > 0 && n % info.block_elems == 0)
      << info.name << " row of " << n << " elements";
  const int64_t nb = n / info.block_elems;
  switch (type) {
    case WeightType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case WeightType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(h[i]);
      return;
    }
    case WeightType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(h[i]);
      return;
    }
    case WeightType::kQ4_0:
      return DequantQ4_0(static_cast<const BlockQ4_0*>(src), nb, dst);
    case WeightType::kQ4_1:
      return DequantQ4_1(static_cast<const BlockQ4_1*>(src), nb, dst);
    case WeightType::kQ5_0:
      return DequantQ5_0(static_cast<const BlockQ5_0*>(src), nb, dst);
    case WeightType::kQ5_1:
      return DequantQ5_1(static_cast<const BlockQ5_1*>(src), nb, dst);
    case WeightType::kQ8_0:
      return DequantQ8_0(static_cast<const BlockQ8_0*>(src), nb, dst);
    case WeightType::kQ2_K:
      return DequantQ2_K(static_cast<const BlockQ2_K*>(src), nb, dst);
    case WeightType::kQ3_K:
      return DequantQ3_K(static_cast<const BlockQ3_K*>(src), nb, dst);
    case WeightType::kIQ4_NL:
      return DequantIQ4_NL(static_cast<const BlockIQ4_NL*>(src), nb, dst);
    case WeightType::kIQ4_XS:
      return DequantIQ4_XS(static_cast<const BlockIQ4_XS*>(src), nb, dst);
    case WeightType::kMXFP4:
      return DequantMXFP4(static_cast<const BlockMXFP4*>(src), nb, dst);
    case WeightType::kIQ2_XXS:
    case WeightType::kIQ2_XS:
    case WeightType::kIQ2_S:
    case WeightType::kIQ3_XXS:
    case WeightType::kIQ3_S:
    case WeightType::kIQ1_S:
    case WeightType::kIQ1_M:
      return DequantGrid(type, static_cast<const uint8_t*>(src), nb, dst);
    case WeightType::kQ4_K:
      return DequantQ4_K(static_cast<const BlockQ4_K*>(src), nb, dst);
    case WeightType::kQ5_K:
      return DequantQ5_K(static_cast<const BlockQ5_K*>(src), nb, dst);
    case WeightType::kQ6_K:
      return DequantQ6_K(static_cast<const BlockQ6_K*>(src), nb, dst);
  }
  WCHECK(false) << "unhandled weight type " << static_cast<uint32_t>(type);
}

}  // namespace waste::kernels
