// GgufFile on real fixtures (stories260K, a GGUF v1 vocab, llama.cpp vocab
// files, a file with a non-standard value type) and writer -> reader round
// trips. Corrupt files are in gguf_corruption_test.cc.
#include "storage/gguf.h"

#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/gguf_testing.h"
#include "storage/gguf_writer.h"
#include "tests/testdata.h"

namespace waste::storage {
namespace {

using ::testing::HasSubstr;
using ::waste::storage::testing::StringFile;

std::string ReadFixture(const std::string& relative) {
  const std::string path = waste::testing::ModelPath(relative);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::unique_ptr<GgufFile>> ParseFixture(const std::string& relative) {
  const size_t slash = relative.rfind('/');
  StringFile file(ReadFixture(relative), relative.substr(slash + 1));
  return GgufFile::Parse(file);
}

// Serves one in-memory file; enough Env for GgufFile::Open.
class OneFileEnv : public Env {
 public:
  OneFileEnv(std::string path, std::string bytes) : path_(path), bytes_(std::move(bytes)) {}
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const ReadOptions&) override {
    if (path != path_) return absl::NotFoundError(path);
    return std::make_unique<StringFile>(bytes_, path);
  }
  absl::StatusOr<std::unique_ptr<ReadQueue>> NewReadQueue(const RandomAccessFile*,
                                                          const ReadQueueOptions&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<uint64_t> GetFileSize(const std::string&) override { return bytes_.size(); }
  bool FileExists(const std::string& path) override { return path == path_; }
  absl::Status RenameFile(const std::string&, const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::Status DeleteFile(const std::string&) override { return absl::UnimplementedError(""); }

 private:
  std::string path_;
  std::string bytes_;
};

TEST(GgufFixtureTest, Stories260K) {
  OneFileEnv env("/models/stories260K.gguf", ReadFixture("stories260K/stories260K.gguf"));
  absl::StatusOr<std::unique_ptr<GgufFile>> opened =
      GgufFile::Open(&env, "/models/stories260K.gguf");
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& f = **opened;
  EXPECT_EQ(f.path(), "/models/stories260K.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 14176u);
  EXPECT_EQ(f.file_size(), 1185376u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.tensors().size(), 48u);

  EXPECT_EQ(f.GetString("general.architecture").value(), "llama");
  EXPECT_EQ(f.GetString("tokenizer.ggml.model").value(), "llama");
  EXPECT_EQ(f.GetUint("llama.embedding_length").value(), 64u);
  EXPECT_EQ(f.GetUint("llama.feed_forward_length").value(), 172u);
  EXPECT_EQ(f.GetUint("llama.attention.head_count").value(), 8u);
  EXPECT_EQ(f.GetUint("llama.attention.head_count_kv").value(), 4u);
  EXPECT_EQ(f.GetUint("llama.block_count").value(), 5u);
  EXPECT_EQ(f.GetInt("llama.rope.dimension_count").value(), 8);
  EXPECT_EQ(f.GetUint("llama.context_length").value(), 2048u);
  EXPECT_NEAR(f.GetFloat("llama.attention.layer_norm_rms_epsilon").value(), 1e-5, 1e-12);
  EXPECT_EQ(f.GetUint("tokenizer.ggml.bos_token_id").value(), 1u);
  EXPECT_EQ(f.GetUint("tokenizer.ggml.eos_token_id").value(), 2u);
  EXPECT_EQ(f.GetUint("tokenizer.ggml.unknown_token_id").value(), 0u);
  EXPECT_EQ(f.GetUint("tokenizer.ggml.padding_token_id").value(), 0xFFFFFFFFu);

  std::vector<std::string> tokens = f.GetStringArray("tokenizer.ggml.tokens").value();
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[403], "\xE2\x96\x81Once");  // "▁Once"
  EXPECT_EQ(f.GetFloatArray("tokenizer.ggml.scores").value().size(), 512u);
  std::vector<int64_t> token_types = f.GetIntArray("tokenizer.ggml.token_type").value();
  ASSERT_EQ(token_types.size(), 512u);
  EXPECT_EQ(token_types[0], 2);
  EXPECT_EQ(token_types[1], 3);

  struct Shape {
    const char* suffix;
    std::vector<int64_t> shape;
  };
  const Shape block_shapes[] = {
      {"attn_q.weight", {64, 64}},    {"attn_k.weight", {64, 32}},
      {"attn_v.weight", {64, 32}},    {"attn_output.weight", {64, 64}},
      {"attn_norm.weight", {64}},     {"ffn_gate.weight", {64, 172}},
      {"ffn_down.weight", {172, 64}}, {"ffn_up.weight", {64, 172}},
      {"ffn_norm.weight", {64}},
  };
  auto expect_tensor = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const TensorInfo* t = f.FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, GgmlType::kF32) << name;
    EXPECT_EQ(t->shape, shape) << name;
    EXPECT_EQ(t->size, static_cast<uint64_t>(t->NumElements()) * 4) << name;
    EXPECT_EQ(t->offset % 32, 0u) << name;
    EXPECT_LE(t->offset + t->size, f.file_size()) << name;
  };
  expect_tensor("token_embd.weight", {64, 512});
  expect_tensor("output_norm.weight", {64});
  expect_tensor("output.weight", {64, 512});
  for (int layer = 0; layer < 5; ++layer) {
    for (const Shape& s : block_shapes) {
      expect_tensor("blk." + std::to_string(layer) + "." + s.suffix, s.shape);
    }
  }
  const TensorInfo& first = f.tensors()[0];
  EXPECT_EQ(first.name, "token_embd.weight");
  EXPECT_EQ(first.offset, 14176u);
  EXPECT_EQ(first.NumRows(), 512);
  EXPECT_EQ(f.tensors().back().name, "blk.4.ffn_norm.weight");
  EXPECT_EQ(f.tensors().back().offset + f.tensors().back().size, f.file_size());
  EXPECT_EQ(f.FindTensor("nope"), nullptr);
}

TEST(GgufFixtureTest, Version1Vocab) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f =
      ParseFixture("gguf-conformance/ggml-vocab-llama.v1.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 1u);
  EXPECT_EQ((*f)->tensors().size(), 0u);
  EXPECT_EQ((*f)->metadata().size(), 13u);
  EXPECT_EQ((*f)->GetString("general.architecture").value(), "llama");
  std::vector<std::string> tokens = (*f)->GetStringArray("tokenizer.ggml.tokens").value();
  ASSERT_EQ(tokens.size(), 32000u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ((*f)->GetFloatArray("tokenizer.ggml.scores").value().size(), 32000u);
}

TEST(GgufFixtureTest, NonStandardValueType13IsRefused) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f =
      ParseFixture("gguf-conformance/test_writer.nonstandard-kvtype13.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(),
              HasSubstr("test_writer.nonstandard-kvtype13.gguf: key 'dict1'"));
  EXPECT_THAT(f.status().message(), HasSubstr("unknown value type 13"));
}

TEST(GgufFixtureTest, LlamaCppVocabFilesOpen) {
  for (const char* name :
       {"bert-bge", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2", "llama-spm"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::unique_ptr<GgufFile>> f =
        ParseFixture(std::string("llama.cpp-vocab/ggml-vocab-") + name + ".gguf");
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->version(), 3u);
    EXPECT_EQ((*f)->tensors().size(), 0u);
    EXPECT_GT((*f)->GetStringArray("tokenizer.ggml.tokens").value().size(), 1000u);
  }
}

// --- Writer -> reader round trips ---

std::vector<std::pair<std::string, GgufValue>> EveryValueType() {
  std::vector<std::pair<std::string, GgufValue>> kv;
  kv.emplace_back("general.architecture", GgufValue::String("llama"));
  kv.emplace_back("u8", GgufValue::Uint8(250));
  kv.emplace_back("i8", GgufValue::Int8(-128));
  kv.emplace_back("u16", GgufValue::Uint16(65535));
  kv.emplace_back("i16", GgufValue::Int16(-32768));
  kv.emplace_back("u32", GgufValue::Uint32(4000000000u));
  kv.emplace_back("i32", GgufValue::Int32(-2000000000));
  kv.emplace_back("u64", GgufValue::Uint64(~uint64_t{0}));
  kv.emplace_back("i64", GgufValue::Int64(INT64_MIN));
  kv.emplace_back("f32", GgufValue::Float32(1.5f));
  kv.emplace_back("f64", GgufValue::Float64(-2.25e300));
  kv.emplace_back("bool.true", GgufValue::Bool(true));
  kv.emplace_back("bool.false", GgufValue::Bool(false));
  kv.emplace_back("str.empty", GgufValue::String(""));
  kv.emplace_back("str.utf8", GgufValue::String(std::string("\xE2\x96\x81hello\n\0x", 11)));
  kv.emplace_back("arr.empty", GgufValue::Array(GgufValueType::kFloat32, {}));
  kv.emplace_back("arr.str", GgufValue::Array(GgufValueType::kString,
                                              {GgufValue::String("a"), GgufValue::String(""),
                                               GgufValue::String("ccc")}));
  kv.emplace_back("arr.u8", GgufValue::Array(GgufValueType::kUint8,
                                             {GgufValue::Uint8(1), GgufValue::Uint8(255)}));
  kv.emplace_back("arr.i8", GgufValue::Array(GgufValueType::kInt8, {GgufValue::Int8(-1)}));
  kv.emplace_back("arr.u16", GgufValue::Array(GgufValueType::kUint16, {GgufValue::Uint16(7)}));
  kv.emplace_back("arr.i16", GgufValue::Array(GgufValueType::kInt16, {GgufValue::Int16(-7)}));
  kv.emplace_back("arr.u32", GgufValue::Array(GgufValueType::kUint32, {GgufValue::Uint32(9)}));
  kv.emplace_back("arr.i32", GgufValue::Array(GgufValueType::kInt32,
                                              {GgufValue::Int32(-9), GgufValue::Int32(3)}));
  kv.emplace_back("arr.u64", GgufValue::Array(GgufValueType::kUint64, {GgufValue::Uint64(1)}));
  kv.emplace_back("arr.i64", GgufValue::Array(GgufValueType::kInt64, {GgufValue::Int64(-1)}));
  kv.emplace_back("arr.f32", GgufValue::Array(GgufValueType::kFloat32,
                                              {GgufValue::Float32(0.5f), GgufValue::Float32(-1)}));
  kv.emplace_back("arr.f64", GgufValue::Array(GgufValueType::kFloat64, {GgufValue::Float64(3)}));
  kv.emplace_back("arr.bool", GgufValue::Array(GgufValueType::kBool,
                                               {GgufValue::Bool(true), GgufValue::Bool(false)}));
  kv.emplace_back(
      "arr.nested",
      GgufValue::Array(GgufValueType::kArray,
                       {GgufValue::Array(GgufValueType::kInt32, {GgufValue::Int32(1)}),
                        GgufValue::Array(GgufValueType::kString, {GgufValue::String("x")}),
                        GgufValue::Array(GgufValueType::kArray, {})}));
  return kv;
}

struct RoundTripParam {
  uint32_t version;
  uint64_t alignment;
};

class GgufRoundTripTest : public ::testing::TestWithParam<RoundTripParam> {};

TEST_P(GgufRoundTripTest, EveryValueTypeAndTensorType) {
  const RoundTripParam p = GetParam();
  std::string bytes;
  StringSink sink(&bytes);
  GgufWriter writer(&sink, GgufWriterOptions{.alignment = p.alignment, .version = p.version});
  const auto kv = EveryValueType();
  for (const auto& [key, value] : kv) ASSERT_TRUE(writer.AddMetadata(key, value).ok()) << key;

  // One tensor of every type: two blocks per row, three rows; plus a 4-d,
  // a 0-d and an empty tensor.
  struct Planned {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    std::string data;
  };
  std::vector<Planned> planned;
  for (const GgmlTypeTraits& t : AllGgmlTypes()) {
    planned.push_back({std::string("t.") + std::string(t.name), t.type, {2 * t.block_size, 3}, ""});
  }
  planned.push_back({"t.4d", GgmlType::kF16, {2, 3, 4, 5}, ""});
  planned.push_back({"t.scalar", GgmlType::kF32, {}, ""});
  planned.push_back({"t.empty", GgmlType::kQ4_K, {256, 0}, ""});
  for (size_t i = 0; i < planned.size(); ++i) {
    absl::StatusOr<uint64_t> size =
        writer.AddTensor(planned[i].name, planned[i].type, planned[i].shape);
    ASSERT_TRUE(size.ok()) << size.status();
    planned[i].data.resize(*size);
    for (size_t b = 0; b < *size; ++b) planned[i].data[b] = static_cast<char>(i * 31 + b);
  }
  ASSERT_TRUE(writer.WriteHeader().ok());
  for (const Planned& t : planned) {
    // Odd-sized chunks exercise the streaming path.
    for (size_t off = 0; off < t.data.size(); off += 7) {
      ASSERT_TRUE(writer.AppendTensorData(t.name, std::string_view(t.data).substr(off, 7)).ok());
    }
  }
  ASSERT_TRUE(writer.Finish().ok());
  EXPECT_EQ(writer.bytes_written(), bytes.size());
  EXPECT_EQ(bytes.size() % p.alignment, 0u);

  StringFile file(bytes);
  absl::StatusOr<std::unique_ptr<GgufFile>> parsed = GgufFile::Parse(file);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const GgufFile& f = **parsed;
  EXPECT_EQ(f.version(), p.version);
  EXPECT_EQ(f.alignment(), p.alignment);
  EXPECT_EQ(f.data_offset(), writer.data_offset());
  EXPECT_EQ(f.data_offset() % p.alignment, 0u);

  // Metadata in order, plus general.alignment first when not the default.
  size_t skip = p.alignment == kGgufDefaultAlignment ? 0 : 1;
  ASSERT_EQ(f.metadata().size(), kv.size() + skip);
  if (skip == 1) EXPECT_EQ(f.GetUint("general.alignment").value(), p.alignment);
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(f.metadata()[i + skip].first, kv[i].first);
    EXPECT_TRUE(f.metadata()[i + skip].second == kv[i].second) << kv[i].first;
  }

  ASSERT_EQ(f.tensors().size(), planned.size());
  for (size_t i = 0; i < planned.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, planned[i].name);
    EXPECT_EQ(t.type, planned[i].type);
    EXPECT_EQ(t.shape, planned[i].shape);
    EXPECT_EQ(t.size, planned[i].data.size());
    EXPECT_EQ(static_cast<int64_t>(t.offset), writer.TensorOffset(t.name));
    EXPECT_EQ(bytes.substr(t.offset, t.size), planned[i].data);
  }
  EXPECT_EQ(f.FindTensor("t.Q4_K")->NumRows(), 3);
  EXPECT_EQ(f.FindTensor("t.4d")->NumElements(), 120);
  EXPECT_EQ(f.FindTensor("t.4d")->NumRows(), 60);
  EXPECT_EQ(f.FindTensor("t.scalar")->NumElements(), 1);
  EXPECT_EQ(f.FindTensor("t.empty")->NumRows(), 0);
}

INSTANTIATE_TEST_SUITE_P(Versions, GgufRoundTripTest,
                         ::testing::Values(RoundTripParam{3, 32}, RoundTripParam{2, 32},
                                           RoundTripParam{1, 32}, RoundTripParam{3, 64},
                                           RoundTripParam{3, 1}, RoundTripParam{3, 4096}));

std::unique_ptr<GgufFile> WriteAndParse(const std::vector<std::pair<std::string, GgufValue>>& kv) {
  std::string bytes;
  StringSink sink(&bytes);
  GgufWriter writer(&sink);
  for (const auto& [key, value] : kv) EXPECT_TRUE(writer.AddMetadata(key, value).ok());
  EXPECT_TRUE(writer.Finish().ok());
  StringFile file(bytes);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Parse(file);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

TEST(GgufAccessorTest, ConversionsAndErrors) {
  std::unique_ptr<GgufFile> f = WriteAndParse(EveryValueType());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->GetUint("u8").value(), 250u);
  EXPECT_EQ(f->GetInt("u8").value(), 250);
  EXPECT_EQ(f->GetInt("i8").value(), -128);
  EXPECT_EQ(f->GetUint("u64").value(), ~uint64_t{0});
  EXPECT_EQ(f->GetInt("u64").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetUint("i64").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetFloat("f32").value(), 1.5);
  EXPECT_EQ(f->GetFloat("f64").value(), -2.25e300);
  EXPECT_EQ(f->GetFloat("u8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(f->GetBool("bool.true").value());
  EXPECT_FALSE(f->GetBool("bool.false").value());
  EXPECT_EQ(f->GetString("str.utf8").value().size(), 11u);
  EXPECT_EQ(f->GetStringArray("arr.str").value(), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f->GetIntArray("arr.i32").value(), (std::vector<int64_t>{-9, 3}));
  EXPECT_EQ(f->GetIntArray("arr.u8").value(), (std::vector<int64_t>{1, 255}));
  EXPECT_EQ(f->GetFloatArray("arr.f64").value(), (std::vector<float>{3}));
  EXPECT_TRUE(f->GetFloatArray("arr.empty").value().empty());
  EXPECT_TRUE(f->Has("arr.nested"));
  EXPECT_EQ(f->Find("arr.nested")->array.size(), 3u);

  absl::Status missing = f->GetString("nope").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("'nope'"));
  absl::Status wrong = f->GetString("u32").status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.message(), HasSubstr("'u32' has type uint32, expected string"));
  EXPECT_EQ(f->GetStringArray("arr.i32").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetIntArray("arr.str").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace waste::storage
