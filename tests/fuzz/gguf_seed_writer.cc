// Writes fuzz corpus seeds into a directory:
//   gguf_seed_writer DIR [FILE.gguf ...]
// the GgufWriterSeeds() files, plus for each FILE a shrunken copy (arrays cut
// to 8 elements, tensors cut to one row of one block) that keeps its real
// keys, types and layout but is small enough to mutate quickly.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "storage/gguf.h"
#include "storage/gguf_testing.h"
#include "storage/gguf_writer.h"
#include "tests/fuzz/gguf_seeds.h"

namespace {

using waste::storage::GgufFile;
using waste::storage::GgufValue;
using waste::storage::GgufValueType;

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::fprintf(stderr, "cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

void Shrink(GgufValue& v) {
  if (v.type != GgufValueType::kArray) return;
  if (v.array.size() > 8) v.array.resize(8);
  for (GgufValue& e : v.array) Shrink(e);
}

// Empty string when `path` does not parse (then it is only copied as is).
std::string Shrunken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  waste::storage::testing::StringFile file(ss.str(), path);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Parse(file);
  if (!f.ok()) return "";
  std::string out;
  waste::storage::StringSink sink(&out);
  waste::storage::GgufWriter w(&sink, {.alignment = (*f)->alignment(), .version = (*f)->version()});
  for (auto [key, value] : (*f)->metadata()) {
    if (key == waste::storage::kGgufAlignmentKey) continue;
    Shrink(value);
    if (!w.AddMetadata(key, value).ok()) return "";
  }
  std::vector<uint64_t> sizes;
  for (const auto& t : (*f)->tensors()) {
    const int64_t block = waste::storage::GetGgmlTypeTraits(t.type).block_size;
    absl::StatusOr<uint64_t> size = w.AddTensor(t.name, t.type, {block});
    if (!size.ok()) return "";
    sizes.push_back(*size);
  }
  if (!w.WriteHeader().ok()) return "";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!w.WriteTensorData((*f)->tensors()[i].name, std::string(sizes[i], '\x3c')).ok()) return "";
  }
  if (!w.Finish().ok()) return "";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [FILE.gguf ...]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  for (const auto& [name, bytes] : waste::fuzz::GgufWriterSeeds()) {
    if (!WriteFile(dir + "/" + name, bytes)) return 1;
  }
  for (int i = 2; i < argc; ++i) {
    std::string bytes = Shrunken(argv[i]);
    if (bytes.empty()) continue;
    std::string base = argv[i];
    base = base.substr(base.rfind('/') + 1);
    if (!WriteFile(dir + "/shrunk-" + base, bytes)) return 1;
  }
  return 0;
}
