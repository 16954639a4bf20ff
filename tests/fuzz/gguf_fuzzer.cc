// libFuzzer target for the GGUF reader (tests/fuzz/run_gguf_fuzzer.sh builds
// and runs it with clang; //tests/fuzz:gguf_fuzzer_test runs it over seeds
// under Bazel).
//
// Each input is parsed through an in-memory RandomAccessFile. A refusal must
// be one clean line naming the file; an accepted file must satisfy every
// invariant the reader promises, and must survive a writer -> reader round
// trip unchanged. Violations abort (WCHECK), which libFuzzer reports.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/logging.h"
#include "storage/gguf.h"
#include "storage/gguf_testing.h"
#include "storage/gguf_writer.h"

namespace waste::storage {
namespace {

constexpr char kPath[] = "fuzz.gguf";

bool SameFloat(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Like GgufValue::operator== but NaN equals NaN (a float can hold one).
bool SameValue(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.u != b.u || a.i != b.i || !SameFloat(a.f, b.f) || a.str != b.str) {
    return false;
  }
  if (a.type != GgufValueType::kArray) return true;
  if (a.array_type != b.array_type || a.array.size() != b.array.size()) return false;
  for (size_t i = 0; i < a.array.size(); ++i) {
    if (!SameValue(a.array[i], b.array[i])) return false;
  }
  return true;
}

void CheckInvariants(const GgufFile& f, uint64_t size) {
  WCHECK(f.version() >= 1 && f.version() <= 3);
  WCHECK(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  WCHECK(f.data_offset() % f.alignment() == 0);
  WCHECK(f.file_size() == size);
  WCHECK(f.path() == kPath);
  for (const auto& [key, value] : f.metadata()) {
    WCHECK(f.Find(key) == &value) << key;
    // The accessors must answer (OK or a clean error) for every key.
    (void)f.GetString(key);
    (void)f.GetUint(key);
    (void)f.GetInt(key);
    (void)f.GetFloat(key);
    (void)f.GetBool(key);
    (void)f.GetStringArray(key);
    (void)f.GetIntArray(key);
    (void)f.GetFloatArray(key);
  }
  for (const TensorInfo& t : f.tensors()) {
    WCHECK(f.FindTensor(t.name) == &t) << t.name;
    WCHECK(t.shape.size() <= static_cast<size_t>(kGgufMaxDims));
    WCHECK(GetGgmlTypeTraits(static_cast<uint32_t>(t.type)).has_value());
    WCHECK(t.offset % f.alignment() == 0);
    WCHECK(t.offset >= f.data_offset());
    WCHECK(t.offset <= size && t.size <= size - t.offset) << t.name;
    const int64_t n = t.NumElements();
    const int64_t rows = t.NumRows();
    WCHECK(n >= 0 && rows >= 0);
    const int64_t ne0 = t.shape.empty() ? 1 : t.shape[0];
    std::optional<uint64_t> row_bytes = GgmlRowSize(t.type, ne0);
    WCHECK(row_bytes.has_value());
    WCHECK(*row_bytes * static_cast<uint64_t>(rows) == t.size) << t.name;
  }
}

// Writes what was read, reads it back and compares.
void CheckRoundTrip(const GgufFile& f, const std::string& bytes) {
  std::string out;
  StringSink sink(&out);
  GgufWriter writer(&sink, GgufWriterOptions{.alignment = f.alignment(), .version = f.version()});
  for (const auto& [key, value] : f.metadata()) {
    if (key == kGgufAlignmentKey) continue;  // The options carry it.
    absl::Status s = writer.AddMetadata(key, value);
    WCHECK(s.ok()) << s;
  }
  for (const TensorInfo& t : f.tensors()) {
    absl::StatusOr<uint64_t> size = writer.AddTensor(t.name, t.type, t.shape);
    WCHECK(size.ok()) << size.status();
    WCHECK(*size == t.size);
  }
  absl::Status s = writer.WriteHeader();
  WCHECK(s.ok()) << s;
  for (const TensorInfo& t : f.tensors()) {
    s = writer.WriteTensorData(t.name, std::string_view(bytes).substr(t.offset, t.size));
    WCHECK(s.ok()) << s;
  }
  s = writer.Finish();
  WCHECK(s.ok()) << s;

  waste::storage::testing::StringFile file(out, kPath);
  absl::StatusOr<std::unique_ptr<GgufFile>> again = GgufFile::Parse(file);
  WCHECK(again.ok()) << again.status();
  const GgufFile& g = **again;
  WCHECK(g.version() == f.version());
  WCHECK(g.alignment() == f.alignment());
  size_t j = 0;
  for (const auto& [key, value] : f.metadata()) {
    if (key == kGgufAlignmentKey) continue;
    const GgufValue* other = g.Find(key);
    WCHECK(other != nullptr) << key;
    WCHECK(SameValue(value, *other)) << key;
    ++j;
  }
  WCHECK(g.metadata().size() == j + (f.alignment() != kGgufDefaultAlignment ? 1 : 0));
  WCHECK(g.tensors().size() == f.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorInfo& a = f.tensors()[i];
    const TensorInfo& b = g.tensors()[i];
    WCHECK(a.name == b.name && a.type == b.type && a.shape == b.shape && a.size == b.size);
    WCHECK(std::memcmp(bytes.data() + a.offset, out.data() + b.offset, a.size) == 0) << a.name;
  }
}

}  // namespace
}  // namespace waste::storage

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace waste::storage;  // NOLINT: a C entry point.
  std::string bytes(reinterpret_cast<const char*>(data), size);
  waste::storage::testing::StringFile file(bytes, kPath);
  absl::StatusOr<std::unique_ptr<GgufFile>> parsed = GgufFile::Parse(file);
  if (!parsed.ok()) {
    const std::string message(parsed.status().message());
    WCHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument) << parsed.status();
    WCHECK(message.rfind(std::string(kPath) + ": ", 0) == 0) << message;
    WCHECK(message.find('\n') == std::string::npos) << message;
    return 0;
  }
  CheckInvariants(**parsed, size);
  CheckRoundTrip(**parsed, bytes);
  return 0;
}
