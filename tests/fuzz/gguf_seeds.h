// Small, varied GGUF files made with GgufWriter: starting points for the
// fuzzer's corpus (run_gguf_fuzzer.sh writes them with gguf_seed_writer) and
// inputs for gguf_fuzzer_test.
#ifndef WASTE_TESTS_FUZZ_GGUF_SEEDS_H_
#define WASTE_TESTS_FUZZ_GGUF_SEEDS_H_

#include <string>
#include <utility>
#include <vector>

namespace waste::fuzz {

// (file name, bytes) pairs. Every file parses.
std::vector<std::pair<std::string, std::string>> GgufWriterSeeds();

}  // namespace waste::fuzz

#endif  // WASTE_TESTS_FUZZ_GGUF_SEEDS_H_
