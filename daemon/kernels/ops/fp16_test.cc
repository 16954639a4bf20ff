#include "daemon/kernels/ops/fp16.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "daemon/kernels/ops/test_util.h"
#include "gtest/gtest.h"

namespace waste::kernels::ops {
namespace {

using testing::IsaParamName;

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

TEST(Fp16ScalarTest, KnownValues) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // Ties to even -> overflow.
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // Smallest subnormal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // Tie to even (0).
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // Tie -> even.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // Tie -> even (up).
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
}

// Every half round-trips exactly through f32, and the scalar conversion is
// bit-identical to F16C's vcvtph2ps (NaN quieting included).
TEST(Fp16ScalarTest, AllHalvesMatchF16c) {
  if (!IsaAvailable(Isa::kAvx2)) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float want = HalfToFloat(static_cast<Half>(h));
    float hw;
    HalfToFloatRow(reinterpret_cast<const Half*>(&h), 1, &hw, Isa::kAvx2);
    ASSERT_EQ(Bits(want), Bits(hw)) << "half 0x" << std::hex << h;
    if (!std::isnan(want)) {
      ASSERT_EQ(FloatToHalf(want), h) << "half 0x" << std::hex << h;
    }
  }
}

class Fp16IsaTest : public ::testing::TestWithParam<Isa> {};

// Random f32 bit patterns (all exponents, NaNs, subnormals) plus the
// rounding boundaries between every pair of adjacent halves.
std::vector<float> HardFloats() {
  std::vector<float> v;
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) v.push_back(FromBits(rng()));
  for (uint32_t h = 0; h < 0x7c00; h += 3) {
    const float a = HalfToFloat(static_cast<Half>(h));
    const float b = HalfToFloat(static_cast<Half>(h + 1));
    const float mid = (a + b) / 2;  // Exact in f32.
    v.push_back(mid);
    v.push_back(std::nextafter(mid, 0.0f));
    v.push_back(std::nextafter(mid, 1e30f));
    v.push_back(-mid);
  }
  return v;
}

TEST_P(Fp16IsaTest, FloatToHalfRowBitExact) {
  const std::vector<float> src = HardFloats();
  // Ragged lengths: convert in pieces so every tail length is exercised.
  std::vector<Half> got(src.size()), want(src.size());
  for (size_t i = 0; i < src.size(); ++i) want[i] = FloatToHalf(src[i]);
  size_t done = 0;
  for (int piece = 1; done < src.size(); piece = piece % 37 + 1) {
    const size_t n = std::min(src.size() - done, static_cast<size_t>(piece));
    FloatToHalfRow(src.data() + done, n, got.data() + done, GetParam());
    done += n;
  }
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << "f32 bits 0x" << std::hex << Bits(src[i]);
  }
}

TEST_P(Fp16IsaTest, HalfToFloatRowBitExact) {
  std::vector<Half> src(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) src[h] = static_cast<Half>(h);
  std::vector<float> got(src.size());
  size_t done = 0;
  for (int piece = 1; done < src.size(); piece = piece % 41 + 1) {
    const size_t n = std::min(src.size() - done, static_cast<size_t>(piece));
    HalfToFloatRow(src.data() + done, n, got.data() + done, GetParam());
    done += n;
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    ASSERT_EQ(Bits(got[h]), Bits(HalfToFloat(src[h]))) << "half 0x" << std::hex << h;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, Fp16IsaTest, ::testing::ValuesIn(AvailableIsas()), IsaParamName);

}  // namespace
}  // namespace waste::kernels::ops
