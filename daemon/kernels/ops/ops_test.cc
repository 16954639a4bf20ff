#include "daemon/kernels/ops/ops.h"

#include <cmath>
#include <vector>

#include "daemon/kernels/ops/test_util.h"
#include "gtest/gtest.h"

namespace waste::kernels::ops {
namespace {

using testing::AllNear;
using testing::IsaParamName;
using testing::RaggedSizes;
using testing::RandomVector;

class OpsTest : public ::testing::TestWithParam<Isa> {
 protected:
  Isa isa() const { return GetParam(); }
};

TEST_P(OpsTest, RmsNormMatchesReference) {
  for (int64_t n : RaggedSizes()) {
    SCOPED_TRACE(n);
    const auto x = RandomVector(n, -3, 3, 1 + n);
    const auto w = RandomVector(n, -2, 2, 2 + n);
    for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> want(n), got(n);
      RmsNorm(x.data(), weight, n, 1e-6f, want.data(), Isa::kScalar);
      RmsNorm(x.data(), weight, n, 1e-6f, got.data(), isa());
      EXPECT_TRUE(AllNear(got, want, 2e-6f, 1e-6f));
      // In place gives the same answer.
      std::vector<float> inplace = x;
      RmsNorm(inplace.data(), weight, n, 1e-6f, inplace.data(), isa());
      EXPECT_TRUE(AllNear(inplace, got, 0, 0));
    }
  }
}

TEST_P(OpsTest, RmsNormIsUnitRms) {
  const auto x = RandomVector(4096, -10, 10, 3);
  std::vector<float> y(x.size());
  RmsNorm(x.data(), nullptr, x.size(), 0.0f, y.data(), isa());
  double sum_sq = 0;
  for (float v : y) sum_sq += v * v;
  EXPECT_NEAR(sum_sq / y.size(), 1.0, 1e-5);
}

TEST_P(OpsTest, LayerNormMatchesReference) {
  for (int64_t n : RaggedSizes()) {
    SCOPED_TRACE(n);
    // An offset mean checks the two-pass variance.
    const auto x = RandomVector(n, 97, 103, 4 + n);
    const auto w = RandomVector(n, -2, 2, 5 + n);
    const auto b = RandomVector(n, -1, 1, 6 + n);
    std::vector<float> want(n), got(n);
    LayerNorm(x.data(), w.data(), b.data(), n, 1e-5f, want.data(), Isa::kScalar);
    LayerNorm(x.data(), w.data(), b.data(), n, 1e-5f, got.data(), isa());
    EXPECT_TRUE(AllNear(got, want, 1e-4f, 1e-4f));
    LayerNorm(x.data(), nullptr, nullptr, n, 1e-5f, want.data(), Isa::kScalar);
    LayerNorm(x.data(), nullptr, nullptr, n, 1e-5f, got.data(), isa());
    EXPECT_TRUE(AllNear(got, want, 1e-4f, 1e-4f));
  }
}

TEST_P(OpsTest, SoftmaxMatchesReference) {
  for (int64_t n : RaggedSizes()) {
    SCOPED_TRACE(n);
    // Large logits: without max subtraction exp would overflow.
    const auto x = RandomVector(n, -60, 120, 7 + n);
    std::vector<float> want = x, got = x;
    Softmax(want.data(), n, Isa::kScalar);
    Softmax(got.data(), n, isa());
    EXPECT_TRUE(AllNear(got, want, 1e-5f, 1e-9f));
    double sum = 0;
    for (float v : got) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST_P(OpsTest, SoftmaxMaskedEntriesVanish) {
  std::vector<float> x = {1.0f, -INFINITY, 2.0f, -INFINITY, 0.5f};
  Softmax(x.data(), x.size(), isa());
  EXPECT_LT(x[1], 1e-30f);
  EXPECT_LT(x[3], 1e-30f);
  EXPECT_NEAR(x[0] + x[2] + x[4], 1.0f, 1e-6f);
}

TEST_P(OpsTest, ActivationsMatchReference) {
  for (int64_t n : RaggedSizes()) {
    SCOPED_TRACE(n);
    // Wide range: saturated sigmoids on both sides.
    const auto x = RandomVector(n, -30, 30, 8 + n);
    const auto up = RandomVector(n, -3, 3, 9 + n);
    std::vector<float> want(n), got(n);
    Silu(x.data(), n, want.data(), Isa::kScalar);
    Silu(x.data(), n, got.data(), isa());
    EXPECT_TRUE(AllNear(got, want, 1e-5f, 1e-6f)) << "silu";
    Gelu(x.data(), n, want.data(), Isa::kScalar);
    Gelu(x.data(), n, got.data(), isa());
    EXPECT_TRUE(AllNear(got, want, 1e-5f, 1e-6f)) << "gelu";
    SwiGlu(x.data(), up.data(), n, want.data(), Isa::kScalar);
    SwiGlu(x.data(), up.data(), n, got.data(), isa());
    EXPECT_TRUE(AllNear(got, want, 1e-5f, 1e-6f)) << "swiglu";
  }
}

TEST_P(OpsTest, GeluKnownValues) {
  const std::vector<float> x = {-3.0f, -1.0f, 0.0f, 0.5f, 1.0f, 3.0f};
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated in double.
  const std::vector<float> want = {
      -0.0036373920817729f, -0.15880800939172324f, 0.0f,
      0.34571400982514394f, 0.8411919906082768f,   2.9963626079182272f};
  std::vector<float> got(x.size());
  Gelu(x.data(), x.size(), got.data(), isa());
  EXPECT_TRUE(AllNear(got, want, 1e-5f, 1e-6f));
}

TEST_P(OpsTest, ElementwiseExact) {
  for (int64_t n : RaggedSizes()) {
    SCOPED_TRACE(n);
    const auto a = RandomVector(n, -5, 5, 10 + n);
    const auto b = RandomVector(n, -5, 5, 11 + n);
    // Sentinel past the end catches tail stores that overrun.
    std::vector<float> want(n), got(n + 1, 42.0f);
    Add(a.data(), b.data(), n, want.data(), Isa::kScalar);
    Add(a.data(), b.data(), n, got.data(), isa());
    EXPECT_TRUE(AllNear(got.data(), want.data(), n, 0, 0)) << "add";
    Mul(a.data(), b.data(), n, want.data(), Isa::kScalar);
    Mul(a.data(), b.data(), n, got.data(), isa());
    EXPECT_TRUE(AllNear(got.data(), want.data(), n, 0, 0)) << "mul";
    Scale(a.data(), 0.37f, n, want.data(), Isa::kScalar);
    Scale(a.data(), 0.37f, n, got.data(), isa());
    EXPECT_TRUE(AllNear(got.data(), want.data(), n, 0, 0)) << "scale";
    EXPECT_EQ(got[n], 42.0f);
    // In place on the first operand.
    std::vector<float> acc = a;
    Add(acc.data(), b.data(), n, acc.data(), isa());
    Add(a.data(), b.data(), n, want.data(), Isa::kScalar);
    EXPECT_TRUE(AllNear(acc, want, 0, 0));
  }
}

TEST_P(OpsTest, ZeroLengthIsNoOp) {
  float y = 5.0f;
  Silu(&y, 0, &y, isa());
  Add(&y, &y, 0, &y, isa());
  Scale(&y, 2.0f, 0, &y, isa());
  EXPECT_EQ(y, 5.0f);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, OpsTest, ::testing::ValuesIn(AvailableIsas()), IsaParamName);

TEST(OpsDeathTest, PartialOverlapIsRejected) {
  std::vector<float> x(32, 1.0f);
  EXPECT_DEATH(Add(x.data(), x.data(), 16, x.data() + 1), "overlap");
}

TEST(IsaTest, BestIsaIsAvailable) {
  EXPECT_TRUE(IsaAvailable(BestIsa()));
  EXPECT_EQ(AvailableIsas().front(), Isa::kScalar);
}

}  // namespace
}  // namespace waste::kernels::ops
