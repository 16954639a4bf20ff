// The matrix-unit path (ProductPath::kMatrix): where this machine runs it
// (AMX-INT8), every row's result equals the plain C++ of its arithmetic
// (DotBlocksSequentialRef) to the bit, whatever the batch, the vector's place
// in it, the rows' count and stride, the threads; elsewhere it is the vector
// path, bit for bit. Either way it approximates the same dot as the vector
// loops.
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/matvec_internal.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"
#include "daemon/kernels/test_inputs.h"
#include "daemon/kernels/thread_pool.h"
#include "gtest/gtest.h"

namespace waste::kernels {
namespace {

using Matrix = testing::WeightMatrix;

// The last row ends at the buffer's end: a read past the matrix leaves it.
Matrix MakeMatrix(WeightType type, int64_t rows, int64_t cols, int64_t pad, uint32_t seed) {
  return testing::MakeWeightMatrix(type, rows, cols, pad, /*slack=*/0, seed);
}

// y[b * rows + r] for `batch` inputs of `cols` (x_stride cols + 3).
struct Product {
  std::vector<float> x, y;
  int64_t x_stride;
};

Product RunProduct(const Matrix& m, int64_t batch, ProductPath path, ThreadPool* pool,
                   uint32_t seed) {
  Product p{testing::MakeInput((m.cols + 3) * batch, seed), std::vector<float>(batch * m.rows, -7),
            m.cols + 3};
  Scratch scratch(MatVecScratchBytes(m.type, m.cols, batch));
  const absl::Status s =
      MatMul(m.view(), p.x.data(), p.x_stride, batch, p.y.data(), m.rows, pool, &scratch, path);
  EXPECT_TRUE(s.ok()) << s;
  return p;
}

// The reference of row r against input vector x (quantized as the loops
// quantize it).
float Reference(const Matrix& m, int64_t r, const float* x) {
  std::vector<uint8_t> buf(ActsScratchBytes(m.cols) + 64);
  auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~63);
  const QuantizedActs acts = LayoutActs(aligned, m.cols);
  internal::Avx512Kernels().quantize_acts(m.type, x, m.cols, acts);
  return internal::DotBlocksSequentialRef(m.type, m.row(r), m.cols, acts);
}

class MatrixPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!MatrixUnitAvailable()) GTEST_SKIP() << "no AMX-INT8 here: kMatrix is the vector path";
  }
};

void ExpectReferenceBits(WeightType type, std::initializer_list<int64_t> widths) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (int64_t rows : {1, 15, 16, 17, 32, 45, 70}) {
    for (int64_t cols : widths) {
      for (int64_t batch : {1, 3, 16, 17, 40, 64}) {
        const Matrix m = MakeMatrix(type, rows, cols, rows % 2 ? 6 : 0, ++seed);
        const Product p =
            RunProduct(m, batch, ProductPath::kMatrix, rows > 40 ? &pool : nullptr, seed);
        for (int64_t b = 0; b < batch; ++b) {
          for (int64_t r = 0; r < rows; ++r) {
            const float want = Reference(m, r, &p.x[b * p.x_stride]);
            const float got = p.y[b * rows + r];
            ASSERT_EQ(std::memcmp(&want, &got, sizeof(float)), 0)
                << rows << "x" << cols << " batch " << batch << " vector " << b << " row " << r
                << ": " << got << " vs " << want;
          }
        }
      }
    }
  }
}

TEST_F(MatrixPathTest, Q8_0EqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kQ8_0, {32, 96, 288, 1024});
}

TEST_F(MatrixPathTest, Q4_KEqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kQ4_K, {256, 512, 1280});
}

TEST_F(MatrixPathTest, Q5_KEqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kQ5_K, {256, 512, 1280});
}

// Q6_K: each block in two parts of 16, each with its own scale.
TEST_F(MatrixPathTest, Q6_KEqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kQ6_K, {256, 512, 1280});
}

// The legacy types: Q5_0 signed, Q4_1 and Q5_1 with a min.
TEST_F(MatrixPathTest, Q4_1EqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kQ4_1, {32, 96, 288, 1024});
}

TEST_F(MatrixPathTest, Q5_0EqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kQ5_0, {32, 96, 288, 1024});
}

TEST_F(MatrixPathTest, Q5_1EqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kQ5_1, {32, 96, 288, 1024});
}

// The table types: nibbles looked up in 16 int8 values.
TEST_F(MatrixPathTest, IQ4_NLEqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kIQ4_NL, {32, 96, 288, 1024});
}

TEST_F(MatrixPathTest, IQ4_XSEqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kIQ4_XS, {256, 512, 1280});
}

TEST_F(MatrixPathTest, MXFP4EqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kMXFP4, {32, 96, 288, 1024});
}

TEST_F(MatrixPathTest, Q4_0EqualsItsReferenceToTheBit) {
  ExpectReferenceBits(WeightType::kQ4_0, {32, 96, 288, 1024});
}

// Q4_0 as resident weights take it on AVX-512 (kInterleaved: groups of 4
// rows, a tail of plain rows): each row as its GGUF bytes give it.
TEST_F(MatrixPathTest, InterleavedQ4_0EqualsItsReferenceToTheBit) {
  ThreadPool pool(2);
  uint32_t seed = 100;
  for (int64_t rows : {4, 18, 33, 70}) {
    for (int64_t cols : {256, 1024}) {
      for (int64_t batch : {1, 17, 64}) {
        const Matrix m = MakeMatrix(WeightType::kQ4_0, rows, cols, 0, ++seed);
        Matrix grouped = m;
        InterleaveRows(m.type, rows, cols, grouped.bytes.data(), WeightLayout::kInterleaved);
        WeightView view = grouped.view();
        view.layout = WeightLayout::kInterleaved;
        const std::vector<float> x = testing::MakeInput(cols * batch, seed);
        std::vector<float> y(batch * rows, -7);
        Scratch scratch(MatVecScratchBytes(m.type, cols, batch));
        ASSERT_TRUE(MatMul(view, x.data(), cols, batch, y.data(), rows, &pool, &scratch,
                           ProductPath::kMatrix)
                        .ok());
        for (int64_t b = 0; b < batch; ++b) {
          for (int64_t r = 0; r < rows; ++r) {
            const float want = Reference(m, r, &x[b * cols]);
            ASSERT_EQ(std::memcmp(&want, &y[b * rows + r], sizeof(float)), 0)
                << rows << "x" << cols << " batch " << batch << " vector " << b << " row " << r;
          }
        }
      }
    }
  }
}

TEST_F(MatrixPathTest, AgreesWithTheVectorPath) {
  for (WeightType type :
       {WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_K, WeightType::kQ5_K,
        WeightType::kQ6_K, WeightType::kQ4_1, WeightType::kQ5_0, WeightType::kQ5_1,
        WeightType::kIQ4_NL, WeightType::kIQ4_XS, WeightType::kMXFP4}) {
    const Matrix m = MakeMatrix(type, 50, 512, 0, 7);
    const Product matrix = RunProduct(m, 20, ProductPath::kMatrix, nullptr, 8);
    const Product vec = RunProduct(m, 20, ProductPath::kVector, nullptr, 8);
    double max_diff = 0, max_mag = 0;
    for (size_t i = 0; i < matrix.y.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(double(matrix.y[i]) - vec.y[i]));
      max_mag = std::max(max_mag, std::fabs(double(vec.y[i])));
    }
    EXPECT_GT(max_mag, 0.1);
    EXPECT_LT(max_diff, 1e-5 * max_mag) << "the paths round the same dot differently, no more";
  }
}

TEST_F(MatrixPathTest, SharedProductsAndOtherTypes) {
  // Q8_0 beside Q3_K in one MatMulShared: the Q8_0 rows take the matrix unit,
  // the Q3_K rows (no matrix loop) the vector loops, bit for bit as alone.
  const Matrix q8 = MakeMatrix(WeightType::kQ8_0, 40, 256, 0, 11);
  const Matrix q3k = MakeMatrix(WeightType::kQ3_K, 24, 256, 0, 12);
  const int64_t batch = 18;
  const Product alone8 = RunProduct(q8, batch, ProductPath::kMatrix, nullptr, 13);
  const Product alone3 = RunProduct(q3k, batch, ProductPath::kVector, nullptr, 13);
  std::vector<float> y8(batch * q8.rows), y3(batch * q3k.rows);
  const SharedProduct products[] = {{q8.view(), y8.data(), q8.rows},
                                    {q3k.view(), y3.data(), q3k.rows}};
  Scratch scratch(std::max(MatVecScratchBytes(WeightType::kQ8_0, 256, batch),
                           MatVecScratchBytes(WeightType::kQ3_K, 256, batch)));
  ThreadPool pool(2);
  ASSERT_TRUE(MatMulShared(products, alone8.x.data(), alone8.x_stride, batch, &pool, &scratch,
                           ProductPath::kMatrix)
                  .ok());
  EXPECT_EQ(0, std::memcmp(y8.data(), alone8.y.data(), y8.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(y3.data(), alone3.y.data(), y3.size() * sizeof(float)));
}

}  // namespace
}  // namespace waste::kernels
