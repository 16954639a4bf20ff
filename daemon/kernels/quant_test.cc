// Layouts, conversions and round-trip bounds of the weight formats.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/iq_grids.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"
#include "gtest/gtest.h"

namespace waste::kernels {
namespace {

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(F16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(F16ToF32(0xC000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(F16ToF32(0x7C00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7E00)));
  EXPECT_EQ(F32ToF16(1.0f), 0x3C00);
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // Tie to even: down.
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // Tie to even: up.
  EXPECT_EQ(F32ToF16(1e6f), 0x7C00);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25) * 1.5f), 0x0001);
  EXPECT_EQ(Bf16ToF32(0x3F80), 1.0f);
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // Tie to even.
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
}

TEST(Fp16Test, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToF16(f), h) << h;
    EXPECT_EQ(F32ToBf16(Bf16ToF32(static_cast<uint16_t>(h))), h) << h;
  }
}

std::vector<float> Decode(WeightType type, const void* block, int n) {
  std::vector<float> out(n);
  DequantizeRow(type, block, out.data(), n);
  return out;
}

TEST(DequantizeTest, Q4_0KnownBlock) {
  BlockQ4_0 b;
  b.d = F32ToF16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = Decode(WeightType::kQ4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * (7 - j));
  }
}

TEST(DequantizeTest, Q4_1KnownBlock) {
  BlockQ4_1 b;
  b.d = F32ToF16(0.25f);
  b.m = F32ToF16(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (3 << 4));
  const std::vector<float> y = Decode(WeightType::kQ4_1, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * j - 1);
    EXPECT_EQ(y[j + 16], 0.25f * 3 - 1);
  }
}

TEST(DequantizeTest, Q5_0AndQ5_1KnownBlocks) {
  // qh bit j is bit 4 of element j: set it for elements 1 and 17 only.
  const uint32_t qh = (1u << 1) | (1u << 17);
  BlockQ5_0 b0;
  b0.d = F32ToF16(2.0f);
  std::memcpy(b0.qh, &qh, 4);
  BlockQ5_1 b1;
  b1.d = F32ToF16(2.0f);
  b1.m = F32ToF16(0.5f);
  std::memcpy(b1.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b0.qs[j] = b1.qs[j] = 0x21;  // Low 1, high 2.
  const std::vector<float> y0 = Decode(WeightType::kQ5_0, &b0, 32);
  const std::vector<float> y1 = Decode(WeightType::kQ5_1, &b1, 32);
  for (int j = 0; j < 32; ++j) {
    const int q = (j < 16 ? 1 : 2) + ((j == 1 || j == 17) ? 16 : 0);
    EXPECT_EQ(y0[j], 2.0f * (q - 16)) << j;
    EXPECT_EQ(y1[j], 2.0f * q + 0.5f) << j;
  }
}

TEST(DequantizeTest, Q8_0KnownBlock) {
  BlockQ8_0 b;
  b.d = F32ToF16(0.125f);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  const std::vector<float> y = Decode(WeightType::kQ8_0, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.125f * (j * 8 - 128));
}

// Sub-block scales and mins chosen to use all 6 bits, so that the packing of
// sub-blocks 4..7 (low nibbles in bytes 8..11, top bits in bytes 0..7) is
// exercised: sc = {1, 63, 32, 17, 48, 5, 63, 33}, m = {2, 0, 63, 40, 9, 60, 16, 31}.
constexpr uint8_t kSc[8] = {1, 63, 32, 17, 48, 5, 63, 33};
constexpr uint8_t kMin[8] = {2, 0, 63, 40, 9, 60, 16, 31};

void PackKScalesByHand(uint8_t* s) {
  // Bytes 0..3: sc[0..3] in bits 0-5, top 2 bits of sc[4..7] in bits 6-7.
  // Bytes 4..7: m[0..3] in bits 0-5, top 2 bits of m[4..7] in bits 6-7.
  // Bytes 8..11: low nibble sc[4..7], high nibble low 4 bits of m[4..7].
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(kSc[j] | ((kSc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(kMin[j] | ((kMin[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((kSc[j + 4] & 0xF) | ((kMin[j + 4] & 0xF) << 4));
  }
}

TEST(DequantizeTest, Q4_KKnownBlock) {
  BlockQ4_K b;
  b.d = F32ToF16(0.5f);
  b.dmin = F32ToF16(0.25f);
  PackKScalesByHand(b.scales);
  // Element 64p + l (l < 32) is the low nibble of qs[32p + l]; element
  // 64p + 32 + l its high nibble. Code of element e: e % 16.
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      b.qs[32 * p + l] =
          static_cast<uint8_t>(((64 * p + l) % 16) | (((64 * p + 32 + l) % 16) << 4));
    }
  }
  const std::vector<float> y = Decode(WeightType::kQ4_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32;
    EXPECT_EQ(y[e], 0.5f * kSc[j] * (e % 16) - 0.25f * kMin[j]) << e;
  }
}

TEST(DequantizeTest, Q5_KKnownBlock) {
  BlockQ5_K b;
  b.d = F32ToF16(0.5f);
  b.dmin = F32ToF16(0.25f);
  PackKScalesByHand(b.scales);
  // Code of element e: (e * 7) % 32; bit 4 of element 32j + l is bit j of qh[l].
  std::memset(b.qh, 0, sizeof(b.qh));
  std::memset(b.qs, 0, sizeof(b.qs));
  for (int e = 0; e < 256; ++e) {
    const int code = (e * 7) % 32, j = e / 32, l = e % 32;
    b.qs[32 * (j / 2) + l] |= static_cast<uint8_t>((code & 0xF) << (4 * (j % 2)));
    b.qh[l] |= static_cast<uint8_t>((code >> 4) << j);
  }
  const std::vector<float> y = Decode(WeightType::kQ5_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32;
    EXPECT_EQ(y[e], 0.5f * kSc[j] * ((e * 7) % 32) - 0.25f * kMin[j]) << e;
  }
}

TEST(DequantizeTest, Q6_KKnownBlock) {
  BlockQ6_K b;
  b.d = F32ToF16(0.5f);
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(k % 2 ? -(k + 1) : k + 1);
  std::memset(b.ql, 0, sizeof(b.ql));
  std::memset(b.qh, 0, sizeof(b.qh));
  // Code of element e: (e * 5) % 64. Element 128h + 32r + l: low 4 bits in
  // ql[64h + 32(r%2) + l] (nibble r/2), high 2 bits at qh[32h + l] bits 2r.
  for (int e = 0; e < 256; ++e) {
    const int code = (e * 5) % 64, h = e / 128, r = (e % 128) / 32, l = e % 32;
    b.ql[64 * h + 32 * (r % 2) + l] |= static_cast<uint8_t>((code & 0xF) << (4 * (r / 2)));
    b.qh[32 * h + l] |= static_cast<uint8_t>((code >> 4) << (2 * r));
  }
  const std::vector<float> y = Decode(WeightType::kQ6_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 0.5f * b.scales[e / 16] * ((e * 5) % 64 - 32)) << e;
  }
}

TEST(DequantizeTest, Q2_KKnownBlock) {
  BlockQ2_K b;
  b.d = F32ToF16(0.5f);
  b.dmin = F32ToF16(0.25f);
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<uint8_t>(((k * 5) % 16) | ((15 - k) << 4));
  std::memset(b.qs, 0, sizeof(b.qs));
  // Code of element e: (e * 3) % 4. Element 128n + 32j + l: bits 2j of qs[32n + l].
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, j = (e % 128) / 32, l = e % 32;
    b.qs[32 * n + l] |= static_cast<uint8_t>(((e * 3) % 4) << (2 * j));
  }
  const std::vector<float> y = Decode(WeightType::kQ2_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int k = e / 16;
    EXPECT_EQ(y[e], 0.5f * ((k * 5) % 16) * ((e * 3) % 4) - 0.25f * (15 - k)) << e;
  }
}

TEST(DequantizeTest, Q3_KKnownBlock) {
  // Scales -32..31 chosen to use all 6 bits; packed by hand: the low nibble
  // of scale k in nibble k / 8 of byte k % 8, its top 2 bits at bits
  // 2 * (k / 4) of byte 8 + k % 4.
  constexpr int kScale[16] = {-32, 31, 0, -1, 17, -17, 5, -9, 30, -30, 1, 2, -3, 12, -12, 8};
  BlockQ3_K b;
  b.d = F32ToF16(0.5f);
  std::memset(b.scales, 0, sizeof(b.scales));
  for (int k = 0; k < 16; ++k) {
    const int v = kScale[k] + 32;
    b.scales[k % 8] |= static_cast<uint8_t>((v & 0xF) << (4 * (k / 8)));
    b.scales[8 + k % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (k / 4)));
  }
  // Code of element e: (e * 5) % 8; low 2 bits as in Q2_K, bit 2 of element
  // 32g + l is bit g of hmask[l].
  std::memset(b.qs, 0, sizeof(b.qs));
  std::memset(b.hmask, 0, sizeof(b.hmask));
  for (int e = 0; e < 256; ++e) {
    const int code = (e * 5) % 8, g = e / 32, l = e % 32;
    b.qs[32 * (g / 4) + l] |= static_cast<uint8_t>((code & 3) << (2 * (g % 4)));
    b.hmask[l] |= static_cast<uint8_t>((code >> 2) << g);
  }
  const std::vector<float> y = Decode(WeightType::kQ3_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 0.5f * kScale[e / 16] * ((e * 5) % 8 - 4)) << e;
  }
}

TEST(DequantizeTest, IQ4KnownBlocks) {
  BlockIQ4_NL nl;
  nl.d = F32ToF16(0.25f);
  for (int j = 0; j < 16; ++j) nl.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = Decode(WeightType::kIQ4_NL, &nl, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * kIq4NlValues[j]);
    EXPECT_EQ(y[j + 16], 0.25f * kIq4NlValues[15 - j]);
  }
  // IQ4_XS group scales -32..31: low nibbles in scales_l, top 2 bits in scales_h.
  constexpr int kScale[8] = {-32, 31, 0, -1, 17, -17, 5, 9};
  BlockIQ4_XS xs;
  xs.d = F32ToF16(0.5f);
  xs.scales_h = 0;
  std::memset(xs.scales_l, 0, sizeof(xs.scales_l));
  for (int g = 0; g < 8; ++g) {
    const int v = kScale[g] + 32;
    xs.scales_l[g / 2] |= static_cast<uint8_t>((v & 0xF) << (4 * (g % 2)));
    xs.scales_h |= static_cast<uint16_t>((v >> 4) << (2 * g));
  }
  for (int i = 0; i < 128; ++i) xs.qs[i] = static_cast<uint8_t>((i % 16) | (((i * 7) % 16) << 4));
  const std::vector<float> z = Decode(WeightType::kIQ4_XS, &xs, 256);
  for (int g = 0; g < 8; ++g) {
    for (int j = 0; j < 16; ++j) {
      const int i = 16 * g + j;
      EXPECT_EQ(z[32 * g + j], 0.5f * kScale[g] * kIq4NlValues[i % 16]) << g << " " << j;
      EXPECT_EQ(z[32 * g + 16 + j], 0.5f * kScale[g] * kIq4NlValues[(i * 7) % 16]) << g << " " << j;
    }
  }
}

// IQ2_S by hand (the quant-conformance fixture's IQ2_S file holds no IQ2_S
// tensor: llama.cpp's mix for it is IQ2_XS and IQ3_S). Piece i = 4g + l of
// 8 elements: its 10-bit codebook index is qs[i] plus bits 2l, 2l+1 of
// qh[g]; its signs the byte qs[32 + i]; scales[g] has the 4-bit scale of
// each 16 elements: x = d * (2s + 1) / 8 * sign * grid value.
TEST(DequantizeTest, IQ2_SKnownBlock) {
  BlockIQ2_S b;
  b.d = F32ToF16(0.5f);
  std::memset(b.qh, 0, sizeof(b.qh));
  int index[32];
  for (int i = 0; i < 32; ++i) {
    index[i] = (i * 97 + 5) % 1024;
    b.qs[i] = static_cast<uint8_t>(index[i] & 255);
    b.qh[i / 4] |= static_cast<uint8_t>((index[i] >> 8) << (2 * (i % 4)));
    b.qs[32 + i] = static_cast<uint8_t>(i * 37);
  }
  for (int g = 0; g < 8; ++g) b.scales[g] = static_cast<uint8_t>(g | ((15 - g) << 4));
  const std::vector<float> y = Decode(WeightType::kIQ2_S, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int i = e / 8, j = e % 8, g = e / 32;
    const int s = (e % 32) < 16 ? g : 15 - g;
    const int value = (kIq2SGrid[index[i]] >> (8 * j)) & 0xFF;
    const int sign = (static_cast<uint8_t>(i * 37) >> j) & 1 ? -1 : 1;
    EXPECT_EQ(y[e], 0.5f * (2 * s + 1) / 8 * value * sign) << e;
  }
}

// IQ1_S: every 8 elements are codebook values -1, 0, 1 plus a shift of
// +-1/8 (bit 15 of the group's qh word, set: negative), times d (2s + 1).
TEST(DequantizeTest, IQ1_SKnownBlock) {
  BlockIQ1_S b;
  b.d = F32ToF16(0.25f);
  int index[32];
  for (int g = 0; g < 8; ++g) {
    uint16_t qh = static_cast<uint16_t>((g % 8) << 12 | (g % 2 ? 0x8000 : 0));
    for (int l = 0; l < 4; ++l) {
      index[4 * g + l] = (g * 509 + l * 131) % 2048;
      b.qs[4 * g + l] = static_cast<uint8_t>(index[4 * g + l] & 255);
      qh |= static_cast<uint16_t>((index[4 * g + l] >> 8) << (3 * l));
    }
    std::memcpy(&b.qh[g], &qh, 2);
  }
  const std::vector<float> y = Decode(WeightType::kIQ1_S, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 32;
    const int value = static_cast<int8_t>(kIq1SGrid[index[e / 8]] >> (8 * (e % 8)));
    EXPECT_EQ(y[e], 0.25f * (2 * g + 1) * (value + (g % 2 ? -0.125f : 0.125f))) << e;
  }
}

// Quantize -> dequantize of Gaussian rows. Legacy types: each element is
// within one step d of its block (half a step from rounding, up to a whole
// step where the f16-rounded scale pushes the extreme element into the clamp).
// K-quants: the relative RMS error stays near that of uniform quantization
// with the format's bits (step / sqrt(12) over the data's spread), bounded
// here with margin measured on this quantizer.
TEST(QuantizeTest, RoundTripErrorBounds) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 4096;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  struct Case {
    WeightType type;
    double max_rel_rms;
  };
  const Case cases[] = {
      {WeightType::kF32, 0},
      {WeightType::kF16, 5e-4},
      {WeightType::kBF16, 4e-3},
      {WeightType::kQ8_0, 0.006},
      {WeightType::kQ4_0, 0.12},
      {WeightType::kQ4_1, 0.09},
      {WeightType::kQ5_0, 0.06},
      {WeightType::kQ5_1, 0.045},
      {WeightType::kQ4_K, 0.11},
      {WeightType::kQ5_K, 0.055},
      {WeightType::kQ6_K, 0.03},
      {WeightType::kQ2_K, 0.3},
      {WeightType::kQ3_K, 0.17},
      {WeightType::kIQ4_NL, 0.085},
      {WeightType::kIQ4_XS, 0.085},
      // The codebook types' plain search (quantize_iq.h).
      {WeightType::kIQ3_S, 0.17},
      {WeightType::kIQ3_XXS, 0.22},
      {WeightType::kIQ2_S, 0.3},
      {WeightType::kIQ2_XS, 0.34},
      {WeightType::kIQ2_XXS, 0.4},
      {WeightType::kIQ1_M, 0.5},
      {WeightType::kIQ1_S, 0.56},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> q(RowBytes(c.type, n));
    QuantizeRow(c.type, x.data(), q.data(), n);
    std::vector<float> y(n);
    DequantizeRow(c.type, q.data(), y.data(), n);
    double err2 = 0, ref2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      err2 += (x[i] - y[i]) * (x[i] - y[i]);
      ref2 += x[i] * x[i];
    }
    const double rel = std::sqrt(err2 / ref2);
    EXPECT_LE(rel, c.max_rel_rms) << GetWeightTypeInfo(c.type).name;
    if (GetWeightTypeInfo(c.type).block_elems == 32) {
      for (int64_t b = 0; b < n / 32; ++b) {
        float lo = x[32 * b], hi = x[32 * b];
        for (int j = 0; j < 32; ++j)
          lo = std::min(lo, x[32 * b + j]), hi = std::max(hi, x[32 * b + j]);
        const int bits = c.type == WeightType::kQ8_0                                    ? 8
                         : (c.type == WeightType::kQ5_0 || c.type == WeightType::kQ5_1) ? 5
                                                                                        : 4;
        const float step = (c.type == WeightType::kQ8_0 || c.type == WeightType::kQ4_0 ||
                            c.type == WeightType::kQ5_0)
                               ? std::max(-lo, hi) / ((1 << (bits - 1)) - (bits == 8))
                               : (hi - lo) / ((1 << bits) - 1);
        for (int j = 0; j < 32; ++j) {
          ASSERT_LE(std::fabs(x[32 * b + j] - y[32 * b + j]), 1.01f * step)
              << GetWeightTypeInfo(c.type).name << " block " << b << " elem " << j;
        }
      }
    }
  }
}

TEST(QuantizeTest, ActivationQuantizerBoundsEachElement) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int64_t n = 512;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // An all-zero block.
  std::vector<uint8_t> buf(ActsScratchBytes(n) + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~63ull);
  const QuantizedActs a = LayoutActs(aligned, n);
  QuantizeActsRef(x.data(), n, a);
  for (int64_t b = 0; b < n / 32; ++b) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      EXPECT_LE(std::fabs(x[32 * b + j] - a.d[b] * a.qs[32 * b + j]), 0.5001f * a.d[b]);
      sum += a.qs[32 * b + j];
    }
    EXPECT_FLOAT_EQ(a.s32[b], a.d[b] * sum);
    EXPECT_FLOAT_EQ(a.s16[2 * b] + a.s16[2 * b + 1], a.s32[b]);
  }
}

}  // namespace
}  // namespace waste::kernels
