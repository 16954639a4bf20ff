// Writes the GgufWriterSeeds() files into a directory (the fuzzer's corpus).
//   gguf_seed_writer DIR
#include <cstdio>
#include <fstream>

#include "tests/fuzz/gguf_seeds.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (const auto& [name, bytes] : waste::fuzz::GgufWriterSeeds()) {
    const std::string path = std::string(argv[1]) + "/" + name;
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
