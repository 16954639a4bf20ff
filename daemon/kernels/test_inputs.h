// Test helper of the kernel tests: activation vectors as decode feeds them.
#ifndef WASTE_DAEMON_KERNELS_TEST_INPUTS_H_
#define WASTE_DAEMON_KERNELS_TEST_INPUTS_H_

#include <cstdint>
#include <random>
#include <vector>

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

}  // namespace waste::kernels::testing

#endif  // WASTE_DAEMON_KERNELS_TEST_INPUTS_H_
