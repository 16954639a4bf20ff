// Test helpers shared by this package's tests: random data, ragged sizes,
// tolerant comparison against the scalar reference, and the ISA parameter.
#ifndef WASTE_DAEMON_KERNELS_OPS_TEST_UTIL_H_
#define WASTE_DAEMON_KERNELS_OPS_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "daemon/kernels/ops/isa.h"
#include "gtest/gtest.h"

namespace waste::kernels::ops::testing {

// Lengths around every vector width (8, 16) and the 4x-unrolled loops.
inline const std::vector<int64_t>& RaggedSizes() {
  static const std::vector<int64_t> sizes = {1,  2,   3,   5,   7,   8,    9,    15,
                                             16, 17,  31,  32,  33,  47,   63,   64,
                                             65, 100, 127, 255, 257, 1000, 4096, 4097};
  return sizes;
}

inline std::vector<float> RandomVector(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// |got - want| <= atol + rtol * |want| element-wise; reports the first few
// mismatches with their index.
inline ::testing::AssertionResult AllNear(const float* got, const float* want, int64_t n,
                                          float rtol, float atol) {
  int bad = 0;
  std::string msg;
  for (int64_t i = 0; i < n; ++i) {
    const float tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      if (++bad <= 5) {
        msg += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " +
               std::to_string(want[i]) + ";";
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " differ:" << msg;
}

inline ::testing::AssertionResult AllNear(const std::vector<float>& got,
                                          const std::vector<float>& want, float rtol, float atol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size mismatch";
  return AllNear(got.data(), want.data(), static_cast<int64_t>(got.size()), rtol, atol);
}

// Parameterise a fixture with INSTANTIATE_TEST_SUITE_P(AllIsas, Fixture,
// ::testing::ValuesIn(AvailableIsas()), IsaParamName).
inline std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) {
  return IsaName(info.param);
}

}  // namespace waste::kernels::ops::testing

#endif  // WASTE_DAEMON_KERNELS_OPS_TEST_UTIL_H_
