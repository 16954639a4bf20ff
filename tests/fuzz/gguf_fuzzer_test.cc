// Runs the fuzz target's entry point under Bazel (gcc, optionally ASan) over
// the seed files, every truncation of the small ones, and deterministic
// random mutations, so the target is built and exercised by `bazel test`.
#include <fstream>
#include <random>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/fuzz/gguf_seeds.h"
#include "tests/testdata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace waste::fuzz {
namespace {

void FuzzOne(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::string ReadFixture(const std::string& relative) {
  std::ifstream in(waste::testing::ModelPath(relative), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  for (auto& [name, bytes] : GgufWriterSeeds()) seeds.push_back(std::move(bytes));
  for (const char* fixture : {"gguf-conformance/ggml-vocab-llama.v1.gguf",
                              "gguf-conformance/test_writer.nonstandard-kvtype13.gguf"}) {
    seeds.push_back(ReadFixture(fixture));
  }
  // stories260K's header with its first tensor's data only would not parse;
  // the whole file is 1.2 MB, fine to run whole.
  seeds.push_back(ReadFixture("stories260K/stories260K.gguf"));
  return seeds;
}

TEST(GgufFuzzerTest, SeedsAndTheirTruncations) {
  for (const std::string& seed : Seeds()) {
    FuzzOne(seed);
    if (seed.size() <= 4096) {
      for (size_t len = 0; len < seed.size(); ++len) FuzzOne(seed.substr(0, len));
    }
  }
}

TEST(GgufFuzzerTest, RandomMutations) {
  std::mt19937_64 rng(20240601);
  const uint32_t interesting[] = {0, 1, 4, 8, 9, 12, 13, 31, 32, 0x7FFFFFFF, 0xFFFFFFFF};
  for (const std::string& seed : Seeds()) {
    if (seed.size() > 8192) continue;
    for (int iter = 0; iter < 3000; ++iter) {
      std::string m = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !m.empty(); ++e) {
        const size_t pos = rng() % m.size();
        if (rng() % 2 == 0) {
          m[pos] = static_cast<char>(rng());
        } else {
          const uint32_t v = interesting[rng() % std::size(interesting)];
          for (size_t b = 0; b < 4 && pos + b < m.size(); ++b)
            m[pos + b] = static_cast<char>(v >> (8 * b));
        }
      }
      FuzzOne(m);
    }
  }
}

}  // namespace
}  // namespace waste::fuzz
