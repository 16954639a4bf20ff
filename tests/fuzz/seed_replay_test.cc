// Runs a fuzz target's entry point under Bazel (gcc, or ASan with
// --config=asan) over its committed seed corpus (FUZZ_CORPUS, a directory
// under tests/fuzz/corpus/, set per target in BUILD.bazel) plus every
// truncation of the small seeds and deterministic random mutations and
// splices, so `bazel test` builds and exercises each target without clang.
// A violated invariant aborts, failing the test with the input's name.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#ifndef FUZZ_CORPUS
#error "FUZZ_CORPUS must name the seed directory"
#endif

namespace waste::fuzz {
namespace {

struct Seed {
  std::string name;
  std::string bytes;
};

std::vector<Seed> LoadSeeds() {
  std::vector<Seed> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(FUZZ_CORPUS)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    seeds.push_back({entry.path().filename().string(), bytes.str()});
  }
  std::sort(seeds.begin(), seeds.end(),
            [](const Seed& a, const Seed& b) { return a.name < b.name; });
  return seeds;
}

// The input being run, for the abort handler.
const std::string* current_input = nullptr;

// On a failed check (abort) or a crash: the input goes to stderr in hex and
// to $TEST_UNDECLARED_OUTPUTS_DIR/crash-input (bazel-testlogs/.../outputs),
// so it can be added to the corpus and replayed by run_fuzzer.sh.
void WriteInputAndDie(int signal_number) {
  if (current_input != nullptr) {
    static const char kHex[] = "0123456789abcdef";
    static const char kHeader[] = "\nfailing input (hex): ";
    (void)!write(2, kHeader, sizeof(kHeader) - 1);
    const size_t n = std::min<size_t>(current_input->size(), 8192);
    for (size_t i = 0; i < n; ++i) {
      const unsigned char c = static_cast<unsigned char>((*current_input)[i]);
      const char pair[2] = {kHex[c >> 4], kHex[c & 15]};
      (void)!write(2, pair, 2);
    }
    (void)!write(2, "\n", 1);
    if (const char* dir = getenv("TEST_UNDECLARED_OUTPUTS_DIR"); dir != nullptr) {
      char path[4096];
      snprintf(path, sizeof(path), "%s/crash-input", dir);
      const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        (void)!write(fd, current_input->data(), current_input->size());
        close(fd);
      }
    }
  }
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

void FuzzOne(const std::string& bytes) {
  static const bool installed = [] {
    for (int s : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(s, WriteInputAndDie);
    return true;
  }();
  (void)installed;
  current_input = &bytes;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  current_input = nullptr;
}

TEST(SeedReplayTest, SeedsAndTheirTruncations) {
  const std::vector<Seed> seeds = LoadSeeds();
  ASSERT_FALSE(seeds.empty()) << "no seeds in " << FUZZ_CORPUS;
  for (const Seed& seed : seeds) {
    SCOPED_TRACE(seed.name);
    FuzzOne(seed.bytes);
    if (seed.bytes.size() <= 512) {
      for (size_t len = 0; len < seed.bytes.size(); ++len) FuzzOne(seed.bytes.substr(0, len));
    }
  }
  printf("%s: %zu seeds\n", FUZZ_CORPUS, seeds.size());
}

TEST(SeedReplayTest, RandomMutationsAndSplices) {
  const std::vector<Seed> seeds = LoadSeeds();
  ASSERT_FALSE(seeds.empty());
  std::mt19937_64 rng(20240917);
  const char interesting[] = {'\0',   '\n',   '"',    '\\',   '[',    ']',    '{',
                              '}',    '=',    '<',    '>',    '|',    '\x1f', '\x7f',
                              '\x80', '\xbf', '\xc3', '\xe2', '\xf0', '\xff'};
  for (const Seed& seed : seeds) {
    SCOPED_TRACE(seed.name);
    for (int iter = 0; iter < 200; ++iter) {
      std::string m = seed.bytes;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t pos = m.empty() ? 0 : rng() % (m.size() + 1);
        switch (rng() % 5) {
          case 0:
            if (pos < m.size()) m[pos] = static_cast<char>(rng());
            break;
          case 1:
            m.insert(pos, 1, interesting[rng() % sizeof(interesting)]);
            break;
          case 2:
            if (pos < m.size()) m.erase(pos, 1 + rng() % 8);
            break;
          case 3: {  // Splice in a piece of another seed.
            const std::string& other = seeds[rng() % seeds.size()].bytes;
            if (other.empty()) break;
            const size_t from = rng() % other.size();
            m.insert(pos, other.substr(from, 1 + rng() % 32));
            break;
          }
          case 4:  // Repeat a piece (deep nesting, long runs).
            if (pos < m.size()) {
              const std::string piece = m.substr(pos, 1 + rng() % 4);
              for (int r = 0; r < 1 + static_cast<int>(rng() % 64); ++r) m.insert(pos, piece);
            }
            break;
        }
      }
      FuzzOne(m);
    }
  }
}

}  // namespace
}  // namespace waste::fuzz
