// The interleaved layouts give, to the bit, what the kRows layout of the
// same matrix gives: on every ISA this machine has, for Q4_0, Q8_0 and Q4_K
// (both of its layouts) and IQ4_NL and IQ4_XS (kInterleavedLanes), row
// counts with and without a kRows tail, batches of 1 to 5, one thread or
// two, MatMul and MatMulShared (next to kRows matrices of the same type).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"
#include "daemon/kernels/test_inputs.h"
#include "daemon/kernels/thread_pool.h"
#include "gtest/gtest.h"

namespace waste::kernels {
namespace {

// A dense matrix of random weights (scales varying by row).
std::vector<uint8_t> MakeRows(WeightType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> bytes(RowBytes(type, cols) * rows);
  std::vector<float> src(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : src) v = 0.02f * (1 + r % 5) * normal(rng);
    QuantizeRow(type, src.data(), bytes.data() + r * RowBytes(type, cols), cols);
  }
  return bytes;
}

using testing::MakeInput;

// A type and the interleaved layout it takes.
struct Layout {
  WeightType type;
  WeightLayout layout;
};
constexpr Layout kLayouts[] = {{WeightType::kQ4_0, WeightLayout::kInterleaved},
                               {WeightType::kQ4_0, WeightLayout::kInterleavedLanes},
                               {WeightType::kQ8_0, WeightLayout::kInterleaved},
                               {WeightType::kQ4_K, WeightLayout::kInterleaved},
                               {WeightType::kQ4_K, WeightLayout::kInterleavedLanes},
                               {WeightType::kIQ4_NL, WeightLayout::kInterleavedLanes},
                               {WeightType::kIQ4_XS, WeightLayout::kInterleavedLanes},
                               {WeightType::kMXFP4, WeightLayout::kInterleavedLanes}};

struct Pair {
  std::vector<uint8_t> rows, interleaved;
  WeightView plain_view, interleaved_view;
};

Pair MakePair(Layout layout, int64_t rows, int64_t cols, uint32_t seed) {
  Pair p;
  p.rows = MakeRows(layout.type, rows, cols, seed);
  p.interleaved = p.rows;
  InterleaveRows(layout.type, rows, cols, p.interleaved.data(), layout.layout);
  p.plain_view = DenseWeightView(layout.type, rows, cols, p.rows.data());
  p.interleaved_view = DenseWeightView(layout.type, rows, cols, p.interleaved.data());
  p.interleaved_view.layout = layout.layout;
  return p;
}

std::string Label(Layout l, Isa isa, int64_t rows, int64_t cols, int64_t batch) {
  return std::string(GetWeightTypeInfo(l.type).name) +
         (l.layout == WeightLayout::kInterleavedLanes ? " (lanes)" : "") + " on " +
         std::string(IsaName(isa)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
         " batch " + std::to_string(batch);
}

TEST(InterleaveTest, ProductsAreBitIdenticalToTheRowsLayout) {
  ThreadPool pool(2);
  for (Layout layout : kLayouts) {
    const WeightType type = layout.type;
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 256}, {3, 512}, {4, 256}, {5, 768}, {13, 2048}, {64, 512}, {131, 1024}}) {
      const Pair p = MakePair(layout, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
      if (rows >= kInterleaveRows && cols > 256) {  // Else Q4_K's kInterleaved is kRows.
        ASSERT_NE(p.rows, p.interleaved);
      }
      const int64_t x_stride = cols + 3, y_stride = rows + 2;
      const std::vector<float> x = MakeInput(x_stride * 5, static_cast<uint32_t>(rows));
      Scratch scratch(MatVecScratchBytes(type, cols, 5));
      for (Isa isa : SupportedIsas()) {
        for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
          for (int64_t batch = 1; batch <= 5; ++batch) {
            std::vector<float> want(y_stride * batch, NAN), got(y_stride * batch, NAN);
            ASSERT_TRUE(MatMulOnIsa(isa, p.plain_view, x.data(), x_stride, batch, want.data(),
                                    y_stride, threads, &scratch)
                            .ok());
            ASSERT_TRUE(MatMulOnIsa(isa, p.interleaved_view, x.data(), x_stride, batch, got.data(),
                                    y_stride, threads, &scratch)
                            .ok());
            for (int64_t b = 0; b < batch; ++b) {
              for (int64_t r = 0; r < rows; ++r) {
                ASSERT_EQ(0, std::memcmp(&got[b * y_stride + r], &want[b * y_stride + r], 4))
                    << Label(layout, isa, rows, cols, batch) << " vector " << b << " row " << r
                    << ": " << got[b * y_stride + r] << " vs " << want[b * y_stride + r];
              }
            }
          }
        }
      }
    }
  }
}

TEST(InterleaveTest, SharedProductsMixLayouts) {
  ThreadPool pool(2);
  const int64_t cols = 1024, batch = 3;
  const std::vector<float> x = MakeInput(cols * batch, 5);
  for (Layout layout : kLayouts) {
    const WeightType type = layout.type;
    const Pair q = MakePair(layout, 37, cols, 1), k = MakePair(layout, 9, cols, 2);
    Scratch scratch(MatVecScratchBytes(type, cols, batch));
    for (Isa isa : SupportedIsas()) {
      std::vector<float> want_q(37 * batch), want_k(9 * batch), got_q(37 * batch), got_k(9 * batch);
      const SharedProduct plain[] = {{q.plain_view, want_q.data(), 37},
                                     {k.plain_view, want_k.data(), 9}};
      const SharedProduct mixed[] = {{q.interleaved_view, got_q.data(), 37},
                                     {k.plain_view, got_k.data(), 9}};
      ASSERT_TRUE(MatMulSharedOnIsa(isa, plain, x.data(), cols, batch, &pool, &scratch).ok());
      ASSERT_TRUE(MatMulSharedOnIsa(isa, mixed, x.data(), cols, batch, &pool, &scratch).ok());
      EXPECT_EQ(0, std::memcmp(got_q.data(), want_q.data(), got_q.size() * 4))
          << Label(layout, isa, 37, cols, batch);
      EXPECT_EQ(0, std::memcmp(got_k.data(), want_k.data(), got_k.size() * 4))
          << Label(layout, isa, 9, cols, batch);
    }
  }
}

TEST(InterleaveTest, RejectsWhatCannotBeInterleaved) {
  EXPECT_TRUE(CanInterleave(WeightType::kQ4_0, 256));
  EXPECT_TRUE(CanInterleave(WeightType::kQ8_0, 4096));
  EXPECT_FALSE(CanInterleave(WeightType::kQ4_0, 288));
  EXPECT_TRUE(CanInterleave(WeightType::kQ4_K, 512));
  EXPECT_TRUE(CanInterleave(WeightType::kQ4_K, 512, WeightLayout::kInterleavedLanes));
  EXPECT_TRUE(CanInterleave(WeightType::kQ4_0, 512, WeightLayout::kInterleavedLanes));
  EXPECT_FALSE(CanInterleave(WeightType::kQ8_0, 512, WeightLayout::kInterleavedLanes));
  EXPECT_TRUE(CanInterleave(WeightType::kIQ4_NL, 512, WeightLayout::kInterleavedLanes));
  EXPECT_TRUE(CanInterleave(WeightType::kIQ4_XS, 512, WeightLayout::kInterleavedLanes));
  EXPECT_TRUE(CanInterleave(WeightType::kMXFP4, 512, WeightLayout::kInterleavedLanes));
  EXPECT_FALSE(CanInterleave(WeightType::kMXFP4, 512, WeightLayout::kInterleaved));
  EXPECT_FALSE(CanInterleave(WeightType::kIQ4_NL, 512, WeightLayout::kInterleaved));
  EXPECT_FALSE(CanInterleave(WeightType::kIQ4_NL, 288, WeightLayout::kInterleavedLanes));
  // Resident: lanes for the AVX2 loops, the file's rows for AVX-512's.
  EXPECT_EQ(ResidentLayoutFor(WeightType::kIQ4_XS, 4096, Isa::kAvx2),
            WeightLayout::kInterleavedLanes);
  EXPECT_EQ(ResidentLayoutFor(WeightType::kIQ4_NL, 4096, Isa::kAvxVnni),
            WeightLayout::kInterleavedLanes);
  EXPECT_EQ(ResidentLayoutFor(WeightType::kIQ4_NL, 4096, Isa::kAvx512), WeightLayout::kRows);
  EXPECT_EQ(ResidentLayoutFor(WeightType::kMXFP4, 4096, Isa::kAvx2),
            WeightLayout::kInterleavedLanes);
  EXPECT_EQ(ResidentLayoutFor(WeightType::kMXFP4, 4096, Isa::kAvx512), WeightLayout::kRows);
  EXPECT_EQ(ResidentLayoutFor(WeightType::kQ8_0, 4096, Isa::kAvx2), WeightLayout::kInterleaved);
  EXPECT_FALSE(CanInterleave(WeightType::kQ5_K, 256));
  EXPECT_FALSE(CanInterleave(WeightType::kF32, 256));
  std::vector<uint8_t> w(RowBytes(WeightType::kQ5_K, 512) * 8 + 64);
  std::vector<float> x(512), y(8);
  Scratch scratch(MatVecScratchBytes(WeightType::kQ5_K, 512));
  WeightView v = DenseWeightView(WeightType::kQ5_K, 4, 512, w.data());
  v.layout = WeightLayout::kInterleaved;
  EXPECT_EQ(MatVec(v, x.data(), y.data(), nullptr, &scratch).code(),
            absl::StatusCode::kInvalidArgument);
  WeightView padded = DenseWeightView(WeightType::kQ4_0, 4, 512, w.data());
  padded.layout = WeightLayout::kInterleaved;
  EXPECT_TRUE(MatVec(padded, x.data(), y.data(), nullptr, &scratch).ok());
  padded.row_stride_bytes += 2;
  EXPECT_EQ(MatVec(padded, x.data(), y.data(), nullptr, &scratch).code(),
            absl::StatusCode::kInvalidArgument);
  WeightView lanes = DenseWeightView(WeightType::kQ8_0, 4, 512, w.data());
  lanes.layout = WeightLayout::kInterleavedLanes;
  EXPECT_EQ(MatVec(lanes, x.data(), y.data(), nullptr, &scratch).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace waste::kernels
