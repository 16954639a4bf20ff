// Test helper of the kernel tests: activation vectors as decode feeds them.
#ifndef WASTE_DAEMON_KERNELS_TEST_INPUTS_H_
#define WASTE_DAEMON_KERNELS_TEST_INPUTS_H_

#include <cstdint>
#include <random>
#include <vector>

#include "daemon/kernels/matvec.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels::testing {

// n values from normal(0, 1), every 97th scaled by 10: outliers stretch
// some blocks' activation scale, as real activations do.
inline std::vector<float> MakeInput(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  for (int64_t i = 0; i < n; i += 97) x[i] *= 10;
  return x;
}

// `rows` rows of `cols` weights of `type`, quantized from normal values whose
// scale varies per row, each with a planted outlier, as real weights have:
// row r at r * stride of `bytes` bytes (0xEE where no row is).
inline std::vector<uint8_t> MakeWeightRows(WeightType type, int64_t rows, int64_t cols,
                                           int64_t stride, size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> out(bytes, 0xEE);
  std::vector<float> src(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = 0.02f * (1 + r % 5);
    for (float& v : src) v = scale * normal(rng);
    src[(r * 37) % cols] = 8 * scale;
    QuantizeRow(type, src.data(), out.data() + r * stride, cols);
  }
  return out;
}

// A matrix of MakeWeightRows, each row `pad` bytes longer than its data (a
// strided view), `slack` bytes after its last row.
struct WeightMatrix {
  WeightType type;
  int64_t rows, cols, stride;
  std::vector<uint8_t> bytes;
  WeightView view() const { return WeightView{type, rows, cols, bytes.data(), stride}; }
  const uint8_t* row(int64_t r) const { return bytes.data() + r * stride; }
};

inline WeightMatrix MakeWeightMatrix(WeightType type, int64_t rows, int64_t cols, int64_t pad,
                                     int64_t slack, uint32_t seed) {
  const int64_t stride = RowBytes(type, cols) + pad;
  return WeightMatrix{type, rows, cols, stride,
                      MakeWeightRows(type, rows, cols, stride,
                                     (rows - 1) * stride + RowBytes(type, cols) + slack, seed)};
}

}  // namespace waste::kernels::testing

#endif  // WASTE_DAEMON_KERNELS_TEST_INPUTS_H_
