// Every weight type x every ISA this machine has x ragged shapes, against
// the oracle: DequantizeRow + an f32 (here f64) dot.
//
// Tolerance. F32/F16/BF16 dot with x exactly, so only summation order
// differs: 1e-5 of sum |w_i x_i|. The quantized types dot with x rounded to
// int8 per block of 32 (d = max|x| / 127, |x_i - d q_i| <= d / 2), so
//   |y - y_ref| <= sum_i |w_i| d_block(i) / 2
// plus f32 rounding of the products and sums (1e-5 of sum |w_i x_i|). The
// test computes that bound per row from the very w and x it uses.
//
// That bound is loose (a worst case over signs), so the tests also compare
// against the oracle run on the *rounded* activation x' = d * q (what the
// integer path computes exactly, up to f32 rounding): |y - y_ref(x')| <=
// 1e-5 of sum |w_i x'_i|. A wrong zero point or scale fails this one.
#include "daemon/kernels/matvec.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"
#include "daemon/kernels/test_inputs.h"
#include "daemon/kernels/thread_pool.h"
#include "gtest/gtest.h"

namespace waste::kernels {
namespace {

struct Matrix : testing::WeightMatrix {
  std::vector<float> deq;  // rows x cols, the oracle's weights.
};

// Random weights; `pad` extra bytes per row exercise row_stride_bytes.
Matrix MakeMatrix(WeightType type, int64_t rows, int64_t cols, int64_t pad, uint32_t seed) {
  // As many bytes as the rows' strides, and 64 more.
  Matrix m{testing::MakeWeightMatrix(type, rows, cols, pad, pad + 64, seed), {}};
  m.deq.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(type, m.bytes.data() + r * m.stride, m.deq.data() + r * cols, cols);
  }
  return m;
}

using testing::MakeInput;

// |y - y_ref| bound for row r against input x (see the file comment).
double Bound(const Matrix& m, int64_t r, const float* x) {
  double mag = 0, act = 0;
  const float* w = m.deq.data() + r * m.cols;
  for (int64_t b = 0; b < m.cols / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    for (int j = 0; j < 32; ++j) {
      act += std::fabs(w[32 * b + j]) * (amax / 127) / 2;
      mag += std::fabs(w[32 * b + j] * x[32 * b + j]);
    }
  }
  for (int64_t i = m.cols / 32 * 32; i < m.cols; ++i) mag += std::fabs(w[i] * x[i]);
  return (UsesQuantizedActivations(m.type) ? 1.0001 * act : 0.0) + 1e-5 * mag + 1e-6;
}

// x as the quantized kernels see it: each block rounded to d * int8.
std::vector<float> RoundedInput(const std::vector<float>& x) {
  const int64_t n = x.size();
  std::vector<uint8_t> buf(ActsScratchBytes(n) + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~63ull);
  const QuantizedActs a = LayoutActs(aligned, n);
  QuantizeActsRef(x.data(), n, a);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = a.d[i / 32] * a.qs[i];
  return out;
}

// Summation-order tolerance: 1e-5 of sum |w_i x_i|.
double RoundingBound(const Matrix& m, int64_t r, const float* x) {
  double mag = 0;
  for (int64_t i = 0; i < m.cols; ++i) mag += std::fabs(m.deq[r * m.cols + i] * x[i]);
  return 1e-5 * mag + 1e-6;
}

double Reference(const Matrix& m, int64_t r, const float* x) {
  double sum = 0;
  for (int64_t i = 0; i < m.cols; ++i) sum += double{m.deq[r * m.cols + i]} * x[i];
  return sum;
}

std::string Label(WeightType t, Isa isa, int64_t rows, int64_t cols, int threads) {
  return std::string(GetWeightTypeInfo(t).name) + " on " + std::string(IsaName(isa)) + " " +
         std::to_string(rows) + "x" + std::to_string(cols) + " threads " + std::to_string(threads);
}

// Shapes: rows not a multiple of any thread count; cols of 1 block, several
// blocks, and (legacy types) not a multiple of 256: tails of 1 to 4 groups
// and of 5 to 7 (past the first half of the SIMD loops' partial unit).
std::vector<std::pair<int64_t, int64_t>> Shapes(WeightType t) {
  const int be = GetWeightTypeInfo(t).block_elems;
  if (be == 256) return {{1, 256}, {7, 512}, {37, 1280}, {3, 4096}};
  if (be == 32) {
    return {{1, 32}, {5, 96}, {9, 128}, {11, 224}, {37, 288}, {19, 1056}, {6, 1248}, {3, 4096}};
  }
  return {{1, 1}, {5, 17}, {37, 300}, {19, 1056}, {3, 4096}};
}

TEST(MatVecTest, EveryTypeEveryIsaMatchesOracle) {
  ThreadPool pool2(2), pool3(3);
  for (WeightType type : kAllWeightTypes) {
    for (auto [rows, cols] : Shapes(type)) {
      const Matrix m = MakeMatrix(type, rows, cols, /*pad=*/rows % 2 ? 0 : 6, rows * 131 + cols);
      const std::vector<float> x = MakeInput(cols, cols);
      const std::vector<float> xq = UsesQuantizedActivations(type) ? RoundedInput(x) : x;
      Scratch scratch(MatVecScratchBytes(type, cols));
      for (Isa isa : SupportedIsas()) {
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
          const int threads = pool ? pool->num_threads() : 1;
          std::vector<float> y(rows, NAN);
          ASSERT_TRUE(
              MatMulOnIsa(isa, m.view(), x.data(), cols, 1, y.data(), rows, pool, &scratch).ok());
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_NEAR(y[r], Reference(m, r, x.data()), Bound(m, r, x.data()))
                << Label(type, isa, rows, cols, threads) << " row " << r;
            ASSERT_NEAR(y[r], Reference(m, r, xq.data()), RoundingBound(m, r, xq.data()))
                << Label(type, isa, rows, cols, threads) << " row " << r << " (rounded x)";
          }
        }
      }
    }
  }
}

// Blocks of random bytes with sane f16 scales: every codebook index (the
// high windows of the AVX-512 lookups, IQ2_S's 10-bit and IQ1's 11-bit
// indices), sign pattern, sub-scale and Q3_K high bit occurs, which weights
// from the quantizer need not produce. Offsets of the f16 scales per type.
Matrix MakeRandomBlockMatrix(WeightType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const int block_bytes = GetWeightTypeInfo(type).block_bytes;
  Matrix m{type, rows, cols, RowBytes(type, cols), {}, {}};
  m.bytes.resize(m.stride * rows + 64);
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(rng());
  const uint16_t kOne = 0x3C00, kQuarter = 0x3400;  // f16 1.0, 0.25.
  for (int64_t off = 0; off + block_bytes <= m.stride * rows; off += block_bytes) {
    uint8_t* block = m.bytes.data() + off;
    switch (type) {
      case WeightType::kQ2_K:
        std::memcpy(block + offsetof(BlockQ2_K, d), &kOne, 2);
        std::memcpy(block + offsetof(BlockQ2_K, dmin), &kQuarter, 2);
        break;
      case WeightType::kQ3_K:
        std::memcpy(block + offsetof(BlockQ3_K, d), &kOne, 2);
        break;
      case WeightType::kMXFP4:
        // Exponent bytes near 127 (2^-17 .. 2^12): the whole byte would
        // overflow f32 in the dot's sums.
        block[0] = static_cast<uint8_t>(110 + block[0] % 32);
        break;
      case WeightType::kIQ1_M: {
        // d = 0x3C00 spread over the top nibbles of the 4 scale words.
        uint8_t* sc = block + offsetof(BlockIQ1_M, scales);
        sc[1] &= 0x0F, sc[3] &= 0x0F;
        sc[5] = (sc[5] & 0x0F) | 0xC0;
        sc[7] = (sc[7] & 0x0F) | 0x30;
        break;
      }
      default:  // The codebook types and IQ4_XS start with d.
        std::memcpy(block, &kOne, 2);
        break;
    }
  }
  m.deq.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(type, m.bytes.data() + r * m.stride, m.deq.data() + r * cols, cols);
  }
  return m;
}

TEST(MatVecTest, LowBitTypesOnRandomBlocksMatchOracle) {
  ThreadPool pool(2);
  const WeightType types[] = {WeightType::kQ2_K,   WeightType::kQ3_K,    WeightType::kIQ4_XS,
                              WeightType::kIQ3_S,  WeightType::kIQ3_XXS, WeightType::kIQ2_S,
                              WeightType::kIQ2_XS, WeightType::kIQ2_XXS, WeightType::kIQ1_M,
                              WeightType::kIQ1_S,  WeightType::kMXFP4};
  for (WeightType type : types) {
    const int64_t rows = 23, cols = 1024;
    const Matrix m = MakeRandomBlockMatrix(type, rows, cols, 7 + static_cast<uint32_t>(type));
    for (int64_t batch : {1, 3, 6}) {
      const std::vector<float> x = MakeInput(cols * batch, 3 * batch);
      Scratch scratch(MatVecScratchBytes(type, cols, batch));
      for (Isa isa : SupportedIsas()) {
        std::vector<float> y(rows * batch, NAN);
        ASSERT_TRUE(
            MatMulOnIsa(isa, m.view(), x.data(), cols, batch, y.data(), rows, &pool, &scratch)
                .ok());
        for (int64_t b = 0; b < batch; ++b) {
          const std::vector<float> xb(x.begin() + b * cols, x.begin() + (b + 1) * cols);
          const std::vector<float> xq = RoundedInput(xb);
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_NEAR(y[b * rows + r], Reference(m, r, xq.data()), RoundingBound(m, r, xq.data()))
                << Label(type, isa, rows, cols, 2) << " batch " << batch << " b " << b << " row "
                << r << " (random blocks, rounded x)";
          }
        }
      }
    }
  }
}

TEST(MatVecTest, DefaultIsaEntryPoint) {
  const Matrix m = MakeMatrix(WeightType::kQ4_K, 9, 512, 0, 1);
  const std::vector<float> x = MakeInput(512, 2);
  Scratch scratch(MatVecScratchBytes(WeightType::kQ4_K, 512));
  ThreadPool pool(2);
  std::vector<float> y(9);
  ASSERT_TRUE(MatVec(m.view(), x.data(), y.data(), &pool, &scratch).ok());
  for (int64_t r = 0; r < 9; ++r)
    EXPECT_NEAR(y[r], Reference(m, r, x.data()), Bound(m, r, x.data()));
}

// Batches that are not a multiple of the kernels' 4-vector unroll, with
// strided inputs and outputs.
TEST(MatMulTest, BatchesMatchOracle) {
  ThreadPool pool(2);
  for (WeightType type : kAllWeightTypes) {
    const int64_t rows = 21, cols = 512, x_stride = cols + 8, y_stride = rows + 3;
    const Matrix m = MakeMatrix(type, rows, cols, 0, 5);
    for (int64_t batch : {1, 2, 3, 5, 17, 32}) {
      const std::vector<float> x = MakeInput(x_stride * batch, batch);
      Scratch scratch(MatVecScratchBytes(type, cols, batch));
      for (Isa isa : SupportedIsas()) {
        std::vector<float> y(y_stride * batch, NAN);
        ASSERT_TRUE(MatMulOnIsa(isa, m.view(), x.data(), x_stride, batch, y.data(), y_stride, &pool,
                                &scratch)
                        .ok());
        for (int64_t b = 0; b < batch; ++b) {
          const float* xb = x.data() + b * x_stride;
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_NEAR(y[b * y_stride + r], Reference(m, r, xb), Bound(m, r, xb))
                << Label(type, isa, rows, cols, 2) << " batch " << batch << " b " << b;
          }
        }
      }
    }
  }
}

// A row's result must not depend on the other rows of its batch: the
// forward pass batches the tokens of several sessions into one MatMul, and
// a session's logits must be the same to the bit whether it runs alone or
// with others. Each batch position lands in a different tile size (1..4)
// and position, so this covers every NB instantiation of every ISA's loop.
TEST(MatMulTest, EachRowIsBitIdenticalToItsBatchOfOne) {
  ThreadPool pool(2);
  for (WeightType type : kAllWeightTypes) {
    const int be = GetWeightTypeInfo(type).block_elems;
    // Legacy types: 288 and 480 are not multiples of 256 (a tail of 1 group
    // and of 7); float types: 300 leaves a tail after the 16/32-wide loop.
    std::vector<int64_t> widths = {be == 256 ? 512 : (be == 32 ? 288 : 300)};
    if (be == 32) widths.push_back(480);
    for (const int64_t cols : widths) {
      const int64_t rows = 13;
      const int64_t x_stride = cols + 3, y_stride = rows + 2;
      const Matrix m = MakeMatrix(type, rows, cols, 0, 11);
      const std::vector<float> x = MakeInput(x_stride * kMaxBatch, 17);
      Scratch scratch(MatVecScratchBytes(type, cols, kMaxBatch));
      for (Isa isa : SupportedIsas()) {
        // Each row alone.
        std::vector<float> alone(y_stride * kMaxBatch, NAN);
        for (int64_t b = 0; b < kMaxBatch; ++b) {
          ASSERT_TRUE(MatMulOnIsa(isa, m.view(), x.data() + b * x_stride, x_stride, 1,
                                  alone.data() + b * y_stride, y_stride, &pool, &scratch)
                          .ok());
        }
        for (int64_t batch : {1, 2, 3, 4, 5, 7, 8, 33, 64}) {
          // Start at a different row each time, so a row is not always first.
          const int64_t first = (batch * 5) % (kMaxBatch - batch + 1);
          std::vector<float> y(y_stride * batch, NAN);
          ASSERT_TRUE(MatMulOnIsa(isa, m.view(), x.data() + first * x_stride, x_stride, batch,
                                  y.data(), y_stride, &pool, &scratch)
                          .ok());
          for (int64_t b = 0; b < batch; ++b) {
            ASSERT_EQ(0, std::memcmp(&y[b * y_stride], &alone[(first + b) * y_stride],
                                     rows * sizeof(float)))
                << Label(type, isa, rows, cols, 2) << " batch " << batch << " row " << b << ": "
                << y[b * y_stride] << " vs " << alone[(first + b) * y_stride];
          }
        }
      }
    }
  }
}

// Matrices that share an input give, to the bit, what a MatMul each gives:
// runs of one type (one quantized input, one loop over their rows) and a
// change of type between them, with padded strides and strided outputs.
TEST(MatMulSharedTest, EachProductIsBitIdenticalToItsOwnMatMul) {
  ThreadPool pool(2);
  const int64_t cols = 512, x_stride = cols + 5;
  const std::vector<std::vector<std::pair<WeightType, int64_t>>> groups = {
      {{WeightType::kQ4_0, 37}, {WeightType::kQ4_0, 5}, {WeightType::kQ4_0, 5}},
      {{WeightType::kQ4_K, 300}, {WeightType::kQ4_K, 40}, {WeightType::kQ6_K, 40}},
      {{WeightType::kQ8_0, 64}, {WeightType::kQ8_0, 0}, {WeightType::kQ8_0, 130}},
      {{WeightType::kF16, 9}, {WeightType::kQ5_K, 11}, {WeightType::kQ5_K, 7}},
  };
  for (const auto& group : groups) {
    std::vector<Matrix> ms;
    size_t scratch_bytes = 0;
    for (auto [type, rows] : group) {
      ms.push_back(MakeMatrix(type, rows, cols, 2 * (rows % 3), static_cast<uint32_t>(rows + 7)));
      scratch_bytes = std::max(scratch_bytes, MatVecScratchBytes(type, cols, 5));
    }
    Scratch scratch(scratch_bytes);
    for (int64_t batch : {1, 3, 5}) {
      const std::vector<float> x = MakeInput(x_stride * batch, static_cast<uint32_t>(batch));
      for (Isa isa : SupportedIsas()) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<std::vector<float>> alone, shared;
          std::vector<SharedProduct> products;
          for (const Matrix& m : ms) {
            const int64_t y_stride = m.rows + 1;
            alone.emplace_back(y_stride * batch, NAN);
            shared.emplace_back(y_stride * batch, NAN);
            ASSERT_TRUE(MatMulOnIsa(isa, m.view(), x.data(), x_stride, batch, alone.back().data(),
                                    y_stride, p, &scratch)
                            .ok());
          }
          for (size_t i = 0; i < ms.size(); ++i)
            products.push_back({ms[i].view(), shared[i].data(), ms[i].rows + 1});
          ASSERT_TRUE(
              MatMulSharedOnIsa(isa, products, x.data(), x_stride, batch, p, &scratch).ok());
          for (size_t i = 0; i < ms.size(); ++i) {
            const Matrix& m = ms[i];
            for (int64_t b = 0; b < batch; ++b) {
              ASSERT_EQ(0, std::memcmp(&shared[i][b * (m.rows + 1)], &alone[i][b * (m.rows + 1)],
                                       m.rows * sizeof(float)))
                  << Label(m.type, isa, m.rows, cols, p ? 2 : 1) << " product " << i << " batch "
                  << batch << " b " << b;
            }
          }
        }
      }
    }
  }
}

TEST(MatMulSharedTest, RejectsMismatchedColumnsAndTooManyProducts) {
  const Matrix a = MakeMatrix(WeightType::kQ4_0, 4, 256, 0, 1);
  const Matrix b = MakeMatrix(WeightType::kQ4_0, 4, 512, 0, 2);
  std::vector<float> x(512), ya(4), yb(4);
  Scratch scratch(MatVecScratchBytes(WeightType::kQ4_0, 512));
  const SharedProduct mismatched[] = {{a.view(), ya.data(), 4}, {b.view(), yb.data(), 4}};
  EXPECT_EQ(MatMulShared(mismatched, x.data(), 512, 1, nullptr, &scratch).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<SharedProduct> many(kMaxSharedProducts + 1, SharedProduct{a.view(), ya.data(), 4});
  EXPECT_EQ(MatMulShared(many, x.data(), 256, 1, nullptr, &scratch).code(),
            absl::StatusCode::kInvalidArgument);
  many.pop_back();
  EXPECT_TRUE(MatMulShared(many, x.data(), 256, 1, nullptr, &scratch).ok());
}

// Per-head products (MLA's attn_k_b: 128 columns, so a Q5_0 fallback with no
// whole unit of 256): one loop, each product to the bit its own MatMul, also
// when the scratch holds only some of the inputs at once, and when pairs of
// neighbours share their input (a MoE expert's gate and up).
TEST(MatMulEachTest, EachProductIsBitIdenticalToItsOwnMatMul) {
  ThreadPool pool(2);
  for (auto [type, cols] :
       {std::pair{WeightType::kQ5_0, int64_t{128}}, std::pair{WeightType::kQ4_K, int64_t{512}},
        std::pair{WeightType::kF16, int64_t{96}}}) {
    const int64_t heads = 6, rows = 37, x_stride = heads * cols + 3, y_stride = heads * rows + 1;
    std::vector<Matrix> ms;
    for (int64_t h = 0; h < heads; ++h) {
      ms.push_back(MakeMatrix(type, rows, cols, 0, static_cast<uint32_t>(h + 11)));
    }
    for (int64_t batch : {1, 3}) {
      const std::vector<float> x = MakeInput(x_stride * batch, static_cast<uint32_t>(batch));
      // Room for every input at once, and for two; each product with its
      // own input, or pairs sharing one.
      for (auto [fit, pairs] : {std::pair{heads, false}, std::pair{int64_t{2}, false},
                                std::pair{heads / 2, true}, std::pair{int64_t{1}, true}}) {
        Scratch scratch(fit * ((MatVecScratchBytes(type, cols, batch) + 63) / 64 * 64));
        for (Isa isa : SupportedIsas()) {
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::vector<float> alone(y_stride * batch, NAN), each(y_stride * batch, NAN);
            std::vector<OwnProduct> products;
            for (int64_t h = 0; h < heads; ++h) {
              const float* in = &x[(pairs ? h / 2 : h) * cols];
              ASSERT_TRUE(MatMulOnIsa(isa, ms[h].view(), in, x_stride, batch, &alone[h * rows],
                                      y_stride, p, &scratch)
                              .ok());
              products.push_back({ms[h].view(), in, &each[h * rows]});
            }
            ASSERT_TRUE(
                MatMulEachOnIsa(isa, products, x_stride, y_stride, batch, p, &scratch).ok());
            for (int64_t b = 0; b < batch; ++b) {
              ASSERT_EQ(0, std::memcmp(&each[b * y_stride], &alone[b * y_stride],
                                       heads * rows * sizeof(float)))
                  << Label(type, isa, rows, cols, p ? 2 : 1) << " batch " << batch << " b " << b
                  << " scratch for " << fit << (pairs ? " pairs" : "");
            }
          }
        }
      }
    }
  }
}

TEST(MatMulEachTest, RejectsMixedTypesOrWidths) {
  const Matrix a = MakeMatrix(WeightType::kQ4_0, 4, 256, 0, 1);
  const Matrix b = MakeMatrix(WeightType::kQ8_0, 4, 256, 0, 2);
  const Matrix c = MakeMatrix(WeightType::kQ4_0, 4, 512, 0, 3);
  std::vector<float> x(512), ya(4), yb(4);
  Scratch scratch(2 * MatVecScratchBytes(WeightType::kQ8_0, 512));
  const OwnProduct types[] = {{a.view(), x.data(), ya.data()}, {b.view(), x.data(), yb.data()}};
  EXPECT_EQ(MatMulEach(types, 512, 4, 1, nullptr, &scratch).code(),
            absl::StatusCode::kInvalidArgument);
  const OwnProduct widths[] = {{a.view(), x.data(), ya.data()}, {c.view(), x.data(), yb.data()}};
  EXPECT_EQ(MatMulEach(widths, 512, 4, 1, nullptr, &scratch).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MatMulEach({widths, 1}, 512, 4, 1, nullptr, &scratch).ok());
}

TEST(MatVecTest, RejectsBadShapesAndScratch) {
  std::vector<uint8_t> w(RowBytes(WeightType::kQ4_K, 512) * 4);
  std::vector<float> x(512), y(4);
  Scratch scratch(MatVecScratchBytes(WeightType::kQ4_K, 512));
  WeightView v = DenseWeightView(WeightType::kQ4_K, 4, 512, w.data());
  EXPECT_TRUE(MatVec(v, x.data(), y.data(), nullptr, &scratch).ok());
  WeightView bad_cols = v;
  bad_cols.cols = 500;
  EXPECT_EQ(MatVec(bad_cols, x.data(), y.data(), nullptr, &scratch).code(),
            absl::StatusCode::kInvalidArgument);
  WeightView short_stride = v;
  short_stride.row_stride_bytes -= 1;
  EXPECT_FALSE(MatVec(short_stride, x.data(), y.data(), nullptr, &scratch).ok());
  Scratch small(16);
  EXPECT_FALSE(MatVec(v, x.data(), y.data(), nullptr, &small).ok());
  EXPECT_FALSE(MatVec(v, x.data(), y.data(), nullptr, nullptr).ok());
  EXPECT_FALSE(MatMul(v, x.data(), 512, kMaxBatch + 1, y.data(), 4, nullptr, &scratch).ok());
  WeightView unknown = v;
  unknown.type = static_cast<WeightType>(34);  // TQ1_0: not supported.
  EXPECT_FALSE(MatVec(unknown, x.data(), y.data(), nullptr, &scratch).ok());
  // F16 needs no scratch.
  WeightView f16 = DenseWeightView(WeightType::kF16, 2, 256, w.data());
  EXPECT_EQ(MatVecScratchBytes(WeightType::kF16, 256), 0u);
  EXPECT_TRUE(MatVec(f16, x.data(), y.data(), nullptr, nullptr).ok());
}

// The AVX-VNNI build of the AVX2 loops computes the same integers in fewer
// instructions and then the same float steps: every output is bit-identical
// to the AVX2 build's, for every type, short and long rows, any batch.
// The AVX-VNNI loops compute the AVX2 loops' integer dots with other
// instructions and finish them the same way: the same bits. Except Q8_0:
// there AVX-VNNI multiplies q + 128 (vpdpbusd does not saturate) and takes
// the 128 back out in f32 through the activation's block sums, where AVX2
// moves q's sign onto the activation; the two agree to f32 rounding.
TEST(MatMulTest, AvxVnniIsBitIdenticalToAvx2) {
  if (!IsaSupported(Isa::kAvxVnni)) GTEST_SKIP() << "this CPU has no AVX-VNNI";
  ThreadPool pool(2);
  for (WeightType type : kAllWeightTypes) {
    for (int64_t cols : {256, 1024, 1056, 128}) {
      if (cols % GetWeightTypeInfo(type).block_elems != 0) continue;
      const int64_t rows = 13;
      const Matrix m = MakeMatrix(type, rows, cols, 0, 11);
      for (int64_t batch : {1, 4, 9}) {
        const std::vector<float> x = MakeInput(cols * batch, 17 * batch);
        Scratch scratch(MatVecScratchBytes(type, cols, batch));
        std::vector<float> y2(rows * batch), yv(rows * batch);
        ASSERT_TRUE(MatMulOnIsa(Isa::kAvx2, m.view(), x.data(), cols, batch, y2.data(), rows, &pool,
                                &scratch)
                        .ok());
        ASSERT_TRUE(MatMulOnIsa(Isa::kAvxVnni, m.view(), x.data(), cols, batch, yv.data(), rows,
                                &pool, &scratch)
                        .ok());
        const std::vector<float> xq = RoundedInput(x);
        for (int64_t i = 0; i < rows * batch; ++i) {
          const std::string what = Label(type, Isa::kAvxVnni, rows, cols, 0) + " batch " +
                                   std::to_string(batch) + " output " + std::to_string(i);
          if (type == WeightType::kQ8_0) {
            ASSERT_NEAR(y2[i], yv[i], RoundingBound(m, i % rows, xq.data() + i / rows * cols))
                << what;
          } else {
            ASSERT_EQ(std::memcmp(&y2[i], &yv[i], sizeof(float)), 0)
                << what << ": " << y2[i] << " vs " << yv[i];
          }
        }
      }
    }
  }
}

// The codebook loops read their codebooks with gathers or with
// scalar-indexed loads (CodebookReads: AVX-512 IQ1_S, IQ1_M, IQ2_S; AVX2
// and AVX-VNNI IQ3_XXS, IQ3_S): the same entries, the same bits, whichever
// this CPU's probe picks. Random blocks reach every index bit.
TEST(MatMulTest, CodebookGathersAndLoadsGiveTheSameBits) {
  ThreadPool pool(2);
  for (Isa isa : SupportedIsas()) {
    if (isa == Isa::kScalar) continue;
    for (WeightType type : {WeightType::kIQ1_S, WeightType::kIQ1_M, WeightType::kIQ2_S,
                            WeightType::kIQ3_XXS, WeightType::kIQ3_S}) {
      for (int64_t cols : {256, 1024, 2816}) {
        const int64_t rows = 13;
        const Matrix m = MakeRandomBlockMatrix(type, rows, cols, 23 + static_cast<uint32_t>(cols));
        for (int64_t batch : {1, 3, 9}) {
          const std::vector<float> x = MakeInput(cols * batch, 29 * batch);
          Scratch scratch(MatVecScratchBytes(type, cols, batch));
          std::vector<float> y[2];
          for (int g = 0; g < 2; ++g) {
            SetCodebookReads(g ? CodebookReads::kGather : CodebookReads::kScalar);
            y[g].resize(rows * batch);
            ASSERT_TRUE(MatMulOnIsa(isa, m.view(), x.data(), cols, batch, y[g].data(), rows, &pool,
                                    &scratch)
                            .ok());
          }
          SetCodebookReads(CodebookReads::kAuto);
          const std::vector<float> xq = RoundedInput(x);
          for (int64_t i = 0; i < rows * batch; ++i) {
            const std::string what = Label(type, isa, rows, cols, 0) + " batch " +
                                     std::to_string(batch) + " output " + std::to_string(i);
            ASSERT_EQ(std::memcmp(&y[0][i], &y[1][i], sizeof(float)), 0)
                << what << ": " << y[0][i] << " vs " << y[1][i];
            ASSERT_NEAR(y[1][i], Reference(m, i % rows, xq.data() + i / rows * cols),
                        RoundingBound(m, i % rows, xq.data() + i / rows * cols))
                << what;
          }
        }
      }
    }
  }
}

TEST(CpuFeaturesTest, DetectedIsaIsSupported) {
  const std::vector<Isa>& isas = SupportedIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kScalar);
  EXPECT_TRUE(IsaSupported(DetectIsa()));
  for (size_t i = 1; i < isas.size(); ++i) {
    EXPECT_LT(static_cast<int>(isas[i - 1]), static_cast<int>(isas[i])) << "in Isa order";
  }
}

}  // namespace
}  // namespace waste::kernels
