#include "tests/fuzz/gguf_seeds.h"

#include "common/logging.h"
#include "storage/gguf_writer.h"

namespace waste::fuzz {
namespace {

using storage::GgmlType;
using storage::GgufValue;
using storage::GgufValueType;
using storage::GgufWriter;
using storage::GgufWriterOptions;

// Every metadata value type once, arrays of each, and a nested array.
void AddEveryValueType(GgufWriter& w) {
  WCHECK(w.AddString("general.architecture", "llama").ok());
  WCHECK(w.AddUint8("u8", 200).ok());
  WCHECK(w.AddInt8("i8", -3).ok());
  WCHECK(w.AddUint16("u16", 60000).ok());
  WCHECK(w.AddInt16("i16", -300).ok());
  WCHECK(w.AddUint32("u32", 7).ok());
  WCHECK(w.AddInt32("i32", -7).ok());
  WCHECK(w.AddUint64("u64", 1ull << 40).ok());
  WCHECK(w.AddInt64("i64", -(1ll << 40)).ok());
  WCHECK(w.AddFloat32("f32", 0.25f).ok());
  WCHECK(w.AddFloat64("f64", 1e-300).ok());
  WCHECK(w.AddBool("b", true).ok());
  WCHECK(w.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>",
                                                    "\xE2\x96\x81"
                                                    "a"})
             .ok());
  WCHECK(w.AddFloat32Array("tokenizer.ggml.scores", {0, 0, 0, -1.5f}).ok());
  WCHECK(w.AddInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 1}).ok());
  WCHECK(w.AddUint32Array("u32s", {1, 2}).ok());
  WCHECK(w.AddInt64Array("i64s", {-1}).ok());
  WCHECK(w.AddMetadata("nested", GgufValue::Array(GgufValueType::kArray,
                                                  {GgufValue::Array(GgufValueType::kUint8,
                                                                    {GgufValue::Uint8(1)}),
                                                   GgufValue::Array(GgufValueType::kBool, {})}))
             .ok());
}

std::string Write(const GgufWriterOptions& options, bool values,
                  const std::vector<std::pair<GgmlType, std::vector<int64_t>>>& tensors) {
  std::string bytes;
  storage::StringSink sink(&bytes);
  GgufWriter w(&sink, options);
  if (values) AddEveryValueType(w);
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    absl::StatusOr<uint64_t> size =
        w.AddTensor("blk." + std::to_string(i) + ".weight", tensors[i].first, tensors[i].second);
    WCHECK(size.ok()) << size.status();
    sizes.push_back(*size);
  }
  WCHECK(w.WriteHeader().ok());
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string data(sizes[i], static_cast<char>(0x11 * (i + 1)));
    WCHECK(w.WriteTensorData("blk." + std::to_string(i) + ".weight", data).ok());
  }
  WCHECK(w.Finish().ok());
  return bytes;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> GgufWriterSeeds() {
  const std::vector<std::pair<GgmlType, std::vector<int64_t>>> mixed = {
      {GgmlType::kF32, {8, 2}},          {GgmlType::kQ8_0, {32}}, {GgmlType::kF16, {3, 1, 2}},
      {GgmlType::kQ4_K, {256}},          {GgmlType::kF32, {}},    {GgmlType::kQ6_K, {256, 0}},
      {GgmlType::kMXFP4, {32, 1, 1, 2}},
  };
  std::vector<std::pair<std::string, std::string>> seeds;
  seeds.emplace_back("writer-v3-values-tensors.gguf", Write({}, true, mixed));
  seeds.emplace_back("writer-v2.gguf", Write({.version = 2}, true, mixed));
  seeds.emplace_back("writer-v1.gguf", Write({.version = 1}, true, mixed));
  seeds.emplace_back("writer-align64.gguf", Write({.alignment = 64}, false, mixed));
  seeds.emplace_back("writer-align1.gguf", Write({.alignment = 1}, false, mixed));
  seeds.emplace_back("writer-values-only.gguf", Write({}, true, {}));
  seeds.emplace_back("writer-empty.gguf", Write({}, false, {}));
  seeds.emplace_back("writer-one-tensor.gguf", Write({}, false, {{GgmlType::kQ4_0, {64, 2}}}));
  return seeds;
}

}  // namespace waste::fuzz
