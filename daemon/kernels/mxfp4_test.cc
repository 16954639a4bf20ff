// MXFP4 (ggml type 39) checked against its definition rather than against
// code: the llama.cpp build the conformance fixtures come from predates the
// type, so there is no ggml-made file to compare with. The expected values
// are computed here from the OCP MX spec's terms: E2M1 elements {0, 0.5, 1,
// 1.5, 2, 3, 4, 6} with a sign bit (code bit 3), times the E8M0 block scale
// X = 2^(e - 127); ggml stores the elements doubled (kvalues_mxfp4) and
// halves X instead (GGML_E8M0_TO_FP32_HALF), which must come to the same
// floats, e = 0, 1 (subnormal halves) and 255 (2^127, no NaN) included.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"
#include "gtest/gtest.h"

namespace waste::kernels {
namespace {

constexpr float kE2M1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

// Code c of a block with exponent byte e, from the spec.
float SpecValue(int e, int c) {
  const float magnitude = std::ldexp(kE2M1[c & 7], e - 127);  // inf past FLT_MAX.
  return c & 8 ? -magnitude : magnitude;
}

std::vector<float> Decode(const std::vector<BlockMXFP4>& blocks) {
  std::vector<float> y(32 * blocks.size());
  DequantizeRow(WeightType::kMXFP4, blocks.data(), y.data(), static_cast<int64_t>(y.size()));
  return y;
}

TEST(Mxfp4Test, LayoutAndTypeInfo) {
  EXPECT_EQ(sizeof(BlockMXFP4), 17u);
  EXPECT_EQ(offsetof(BlockMXFP4, qs), 1u);
  const WeightTypeInfo info = GetWeightTypeInfo(WeightType::kMXFP4);
  EXPECT_EQ(info.name, "MXFP4");
  EXPECT_EQ(info.block_elems, 32);
  EXPECT_EQ(info.block_bytes, 17);
  EXPECT_TRUE(IsSupportedWeightType(39));
  EXPECT_EQ(RowBytes(WeightType::kMXFP4, 2880), 90 * 17);  // gpt-oss's hidden size.
}

TEST(Mxfp4Test, E8M0HalfScale) {
  EXPECT_EQ(E8M0HalfToF32(0), std::ldexp(1.0f, -128));  // Subnormal.
  EXPECT_EQ(E8M0HalfToF32(1), std::ldexp(1.0f, -127));  // Subnormal.
  EXPECT_EQ(E8M0HalfToF32(2), std::ldexp(1.0f, -126));
  EXPECT_EQ(E8M0HalfToF32(127), 0.5f);
  EXPECT_EQ(E8M0HalfToF32(128), 1.0f);
  EXPECT_EQ(E8M0HalfToF32(131), 8.0f);
  EXPECT_EQ(E8M0HalfToF32(254), std::ldexp(1.0f, 126));
  EXPECT_EQ(E8M0HalfToF32(255), std::ldexp(1.0f, 127));
}

// Every code in both nibbles, for exponents across the whole byte.
TEST(Mxfp4Test, KnownBlocksMatchTheSpec) {
  for (int e : {0, 1, 2, 100, 126, 127, 128, 130, 200, 253, 254, 255}) {
    std::vector<BlockMXFP4> b(1);
    b[0].e = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) b[0].qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    const std::vector<float> y = Decode(b);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], SpecValue(e, j)) << "e " << e << " element " << j;
      EXPECT_EQ(y[j + 16], SpecValue(e, 15 - j)) << "e " << e << " element " << j + 16;
    }
  }
}

// A few values spelled out: e = 130 is X = 8.
TEST(Mxfp4Test, HandComputedValues) {
  std::vector<BlockMXFP4> b(2);
  std::memset(b.data(), 0, b.size() * sizeof(BlockMXFP4));
  b[0].e = 130;
  b[0].qs[0] = 0x7D;   // Element 0: code 0xD = -3 x 8; element 16: code 7 = 6 x 8.
  b[0].qs[5] = 0x91;   // Element 5: 0.5 x 8; element 21: code 9 = -0.5 x 8.
  b[1].e = 127;        // X = 1.
  b[1].qs[15] = 0xA8;  // Element 15: code 8 (-0) -> 0; element 31: code 0xA = -1.
  const std::vector<float> y = Decode(b);
  EXPECT_EQ(y[0], -24.0f);
  EXPECT_EQ(y[16], 48.0f);
  EXPECT_EQ(y[5], 4.0f);
  EXPECT_EQ(y[21], -4.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[32 + 15], 0.0f);
  EXPECT_EQ(y[32 + 31], -1.0f);
  EXPECT_EQ(y[32 + 30], 0.0f);
}

// The quantizer as ggml's quantize_row_mxfp4_ref defines it: e =
// floor(log2 max|x|) - 2 + 127, each element the nearest value, the first
// code of equals (so a tie between 0 and a level is 0, code 0 not 8).
TEST(Mxfp4Test, QuantizeFollowsGgmlRule) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;      // max: e = 125, X = 1/4, levels 0, 1/8, 1/4 ... 3/2.
  x[1] = 0.3f;      // 0.25 (code 2).
  x[2] = -0.7f;     // -0.75 (code 0xD).
  x[3] = 0.0625f;   // Halfway 0 / 0.125: code 0.
  x[4] = -0.0625f;  // Halfway 0 / -0.125: code 0.
  x[17] = -0.875f;  // Halfway -0.75 / -1: -0.75 (code 0xD comes first).
  x[18] = 0.126f;   // 0.125 (code 1).
  std::vector<BlockMXFP4> b(1);
  QuantizeRow(WeightType::kMXFP4, x.data(), b.data(), 32);
  EXPECT_EQ(b[0].e, 125);
  EXPECT_EQ(b[0].qs[0], 0x06);
  EXPECT_EQ(b[0].qs[1] & 0xF, 2);
  EXPECT_EQ(b[0].qs[1] >> 4, 0xD);
  EXPECT_EQ(b[0].qs[2] & 0xF, 0xD);
  EXPECT_EQ(b[0].qs[2] >> 4, 1);
  EXPECT_EQ(b[0].qs[3], 0);
  EXPECT_EQ(b[0].qs[4], 0);
  // The largest magnitude above the top level clips to it: 15 -> 12 at e = 128.
  std::vector<float> big(32, 0.0f);
  big[7] = 15.0f;
  big[8] = -11.0f;
  QuantizeRow(WeightType::kMXFP4, big.data(), b.data(), 32);
  EXPECT_EQ(b[0].e, 128);
  EXPECT_EQ(b[0].qs[7], 0x07);
  EXPECT_EQ(b[0].qs[8], 0x0F);  // -11 -> -12 (nearer than -8).
  // All zero: e = 0, every code 0.
  std::vector<float> zero(32, 0.0f);
  QuantizeRow(WeightType::kMXFP4, zero.data(), b.data(), 32);
  EXPECT_EQ(b[0].e, 0);
  for (uint8_t q : b[0].qs) EXPECT_EQ(q, 0);
}

// Round trip of Gaussian data: each element decodes to the spec value nearest
// to it at the block's exponent, and the exponent follows the rule.
TEST(Mxfp4Test, RoundTripIsNearestSpecValue) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 4096;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = normal(rng) * (i < 2048 ? 0.01f : 3.0f);
  std::vector<BlockMXFP4> b(n / 32);
  QuantizeRow(WeightType::kMXFP4, x.data(), b.data(), n);
  const std::vector<float> y = Decode(b);
  double err2 = 0, ref2 = 0;
  for (int64_t blk = 0; blk < n / 32; ++blk) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * blk + j]));
    const int e = static_cast<int>(std::floor(std::log2(amax))) + 125;
    ASSERT_EQ(b[blk].e, e) << "block " << blk;
    for (int j = 0; j < 32; ++j) {
      const float v = x[32 * blk + j];
      float best = SpecValue(e, 0);
      for (int c = 1; c < 16; ++c) {
        if (std::fabs(SpecValue(e, c) - v) < std::fabs(best - v)) best = SpecValue(e, c);
      }
      ASSERT_EQ(y[32 * blk + j], best) << "block " << blk << " element " << j;
      err2 += (v - best) * (v - best);
      ref2 += v * v;
    }
  }
  // 3 bits of E2M1 per element, measured ~0.09 on this data.
  EXPECT_LT(std::sqrt(err2 / ref2), 0.12);
}

// Weights with every exponent of a realistic range and every code: the dot
// on each ISA this machine has, batched and not, against the f64 dot of the
// dequantized row with the activation as the kernels round it.
TEST(Mxfp4Test, DotMatchesDequantizedDotOnEveryIsa) {
  std::mt19937 rng(5);
  const int64_t rows = 19, cols = 1056;  // Not a multiple of 256: the AVX-512 tail too.
  std::vector<uint8_t> w(RowBytes(WeightType::kMXFP4, cols) * rows);
  for (uint8_t& v : w) v = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < w.size(); off += sizeof(BlockMXFP4)) w[off] = 110 + w[off] % 30;
  std::vector<float> deq(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(WeightType::kMXFP4, w.data() + r * RowBytes(WeightType::kMXFP4, cols),
                  deq.data() + r * cols, cols);
  }
  const WeightView view = DenseWeightView(WeightType::kMXFP4, rows, cols, w.data());
  for (int64_t batch : {1, 3, 5}) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(cols * batch);
    for (float& v : x) v = normal(rng);
    // The activation as every ISA rounds it (d = max|x| / 127 per 32).
    std::vector<float> xq(x.size());
    for (int64_t blk = 0; blk < cols * batch / 32; ++blk) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * blk + j]));
      const float d = amax / 127, id = amax != 0 ? 127 / amax : 0.0f;
      for (int j = 0; j < 32; ++j) xq[32 * blk + j] = d * std::nearbyint(x[32 * blk + j] * id);
    }
    Scratch scratch(MatVecScratchBytes(WeightType::kMXFP4, cols, batch));
    for (Isa isa : SupportedIsas()) {
      std::vector<float> y(rows * batch, NAN);
      ASSERT_TRUE(
          MatMulOnIsa(isa, view, x.data(), cols, batch, y.data(), rows, nullptr, &scratch).ok());
      for (int64_t k = 0; k < batch; ++k) {
        for (int64_t r = 0; r < rows; ++r) {
          double ref = 0, mag = 0;
          for (int64_t i = 0; i < cols; ++i) {
            ref += double{deq[r * cols + i]} * xq[k * cols + i];
            mag += std::fabs(double{deq[r * cols + i]} * xq[k * cols + i]);
          }
          ASSERT_NEAR(y[k * rows + r], ref, 1e-5 * mag + 1e-6)
              << IsaName(isa) << " batch " << batch << " vector " << k << " row " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace waste::kernels
