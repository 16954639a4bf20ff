// Every class of corrupt or hostile GGUF header is refused with one clear
// error, without crashing or allocating absurd amounts (run under ASan/UBSan:
// bazel test --config=asan //storage:gguf_test).
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/gguf.h"
#include "storage/gguf_testing.h"
#include "storage/gguf_writer.h"

namespace waste::storage {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::waste::storage::testing::StringFile;

// Hand-assembled GGUF bytes, so that tests can write what no writer would.
class Raw {
 public:
  explicit Raw(uint32_t version = 3) : version_(version) {}

  Raw& U8(uint8_t v) { return Put(v); }
  Raw& U32(uint32_t v) { return Put(v); }
  Raw& U64(uint64_t v) { return Put(v); }
  Raw& I64(int64_t v) { return Put(v); }
  Raw& Count(uint64_t n) { return version_ == 1 ? U32(static_cast<uint32_t>(n)) : U64(n); }
  Raw& Str(std::string_view s) {
    Count(s.size());
    bytes_.append(s);
    return *this;
  }
  Raw& Bytes(std::string_view s) {
    bytes_.append(s);
    return *this;
  }
  // Magic, version and both counts.
  Raw& Preamble(uint64_t n_tensors, uint64_t n_kv) {
    bytes_.append("GGUF", 4);
    U32(version_);
    Count(n_tensors);
    return Count(n_kv);
  }
  Raw& KvU32(std::string_view key, uint32_t v) { return Str(key).U32(4).U32(v); }
  Raw& Tensor(std::string_view name, std::vector<int64_t> dims, uint32_t type, uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(dims.size()));
    for (int64_t d : dims) version_ == 1 ? U32(static_cast<uint32_t>(d)) : I64(d);
    return U32(type).U64(offset);
  }
  // Pads to `alignment` and appends `data_bytes` zero bytes.
  Raw& Data(uint64_t data_bytes, uint64_t alignment = 32) {
    bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment, '\0');
    bytes_.resize(bytes_.size() + data_bytes, '\0');
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  const std::string& str() const { return bytes_; }

 private:
  template <typename T>
  Raw& Put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.append(b, sizeof(T));
    return *this;
  }
  uint32_t version_;
  std::string bytes_;
};

absl::Status ParseStatus(const std::string& bytes) {
  StringFile file(bytes);
  return GgufFile::Parse(file).status();
}

// Expects a refusal whose message starts with the path and contains `what`.
void ExpectRefused(const std::string& bytes, std::string_view what) {
  absl::Status s = ParseStatus(bytes);
  ASSERT_FALSE(s.ok()) << "accepted; expected: " << what;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), StartsWith("mem.gguf: "));
  EXPECT_THAT(std::string(s.message()), HasSubstr(std::string(what)));
  EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos) << "one line";
}

TEST(GgufCorruptionTest, RawBaselineParses) {
  Raw raw;
  raw.Preamble(2, 1).KvU32("k", 7);
  raw.Tensor("a", {16}, 0, 0).Tensor("b", {32, 2}, 8, 64).Data(64 + 68);
  StringFile file(raw.str());
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Parse(file);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tensors()[1].size, 68u);
}

// A small but varied file from the writer: strings, arrays, three tensors.
std::string SmallWrittenFile(uint32_t version) {
  std::string bytes;
  StringSink sink(&bytes);
  GgufWriter w(&sink, GgufWriterOptions{.version = version});
  EXPECT_TRUE(w.AddString("general.architecture", "llama").ok());
  EXPECT_TRUE(w.AddUint32("llama.block_count", 2).ok());
  EXPECT_TRUE(w.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "bc"}).ok());
  EXPECT_TRUE(w.AddFloat32Array("tokenizer.ggml.scores", {0, -1, -2}).ok());
  EXPECT_TRUE(w.AddBool("flag", true).ok());
  EXPECT_TRUE(w.AddTensor("a", GgmlType::kF32, {8, 2}).ok());
  EXPECT_TRUE(w.AddTensor("b", GgmlType::kQ8_0, {32}).ok());
  EXPECT_TRUE(w.AddTensor("c", GgmlType::kF16, {3}).ok());
  EXPECT_TRUE(w.WriteHeader().ok());
  EXPECT_TRUE(w.WriteTensorData("a", std::string(64, 'a')).ok());
  EXPECT_TRUE(w.WriteTensorData("b", std::string(34, 'b')).ok());
  EXPECT_TRUE(w.WriteTensorData("c", std::string(6, 'c')).ok());
  EXPECT_TRUE(w.Finish().ok());
  return bytes;
}

TEST(GgufCorruptionTest, TruncationAtEveryByteIsRefused) {
  for (uint32_t version : {1u, 2u, 3u}) {
    SCOPED_TRACE(version);
    const std::string full = SmallWrittenFile(version);
    StringFile file(full);
    absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Parse(file);
    ASSERT_TRUE(f.ok()) << f.status();
    const TensorInfo& last = (*f)->tensors().back();
    const uint64_t data_end = last.offset + last.size;
    // Every prefix that cuts the header or any tensor's data is refused;
    // only the trailing padding after the last tensor may be cut.
    for (uint64_t len = 0; len < data_end; ++len) {
      absl::Status s = ParseStatus(full.substr(0, len));
      ASSERT_FALSE(s.ok()) << "prefix of " << len << " bytes accepted";
      ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      ASSERT_THAT(std::string(s.message()), StartsWith("mem.gguf: ")) << s;
    }
    for (uint64_t len = data_end; len <= full.size(); ++len) {
      EXPECT_TRUE(ParseStatus(full.substr(0, len)).ok()) << len;
    }
  }
}

TEST(GgufCorruptionTest, TruncationMessages) {
  ExpectRefused("", "header at byte 0: not a GGUF file (0 bytes)");
  ExpectRefused("GGU", "header at byte 0: not a GGUF file (3 bytes)");
  ExpectRefused("GGUF\x03", "header at byte 4: unexpected end of file");
  const std::string full = SmallWrittenFile(3);
  ExpectRefused(full.substr(0, 100), "key 'llama.block_count' at byte 69: unexpected end of file");
  ExpectRefused(full.substr(0, full.size() - 40), "tensor 'c' at byte");
}

TEST(GgufCorruptionTest, BadMagicAndVersion) {
  ExpectRefused("GGML\x03\0\0\0", "not a GGUF file (magic is not 'GGUF')");
  ExpectRefused(Raw(4).Preamble(0, 0).str(), "unsupported GGUF version 4");
  ExpectRefused(Raw(0).Preamble(0, 0).str(), "unsupported GGUF version 0");
  std::string big_endian = Raw(3).Preamble(0, 0).str();
  std::memcpy(big_endian.data() + 4, "\0\0\0\x03", 4);
  ExpectRefused(big_endian, "big-endian GGUF (version 3) is not supported");
}

TEST(GgufCorruptionTest, AbsurdCounts) {
  ExpectRefused(Raw().Preamble(uint64_t{1} << 60, 0).str(),
                "header at byte 8: tensor count 1152921504606846976 is impossible");
  ExpectRefused(Raw().Preamble(0, ~uint64_t{0}).str(), "header at byte 16: metadata count");
  ExpectRefused(Raw(1).Preamble(0xFFFFFFFF, 0).str(), "tensor count 4294967295 is impossible");
  // Two entries announced, room for one.
  ExpectRefused(Raw().Preamble(0, 2).KvU32("k", 1).str(), "metadata count 2 is impossible");
}

TEST(GgufCorruptionTest, AbsurdStringLengths) {
  const std::string pad(64, '\0');  // So that the counts themselves are plausible.
  ExpectRefused(Raw().Preamble(0, 1).U64(~uint64_t{0}).Bytes(pad).str(),
                "metadata entry 0 at byte 24: key length 18446744073709551615 at byte 24 runs past "
                "end of file");
  ExpectRefused(Raw().Preamble(0, 1).Str("k").U32(8).U64(1000).Bytes("short").str(),
                "key 'k' at byte 24: string length 1000 at byte 37 runs past end of file");
  ExpectRefused(Raw().Preamble(1, 0).U64(uint64_t{1} << 62).Bytes(pad).str(),
                "tensor info 0 at byte 24: tensor name length");
}

TEST(GgufCorruptionTest, AbsurdArrayLengths) {
  // u8 elements: 2^60 of them cannot fit in a few bytes.
  ExpectRefused(Raw().Preamble(0, 1).Str("k").U32(9).U32(0).U64(uint64_t{1} << 60).U8(1).str(),
                "key 'k' at byte 24: array of uint8 at byte 41 has impossible length");
  // Strings take at least 8 bytes each.
  ExpectRefused(Raw().Preamble(0, 1).Str("k").U32(9).U32(8).U64(3).Str("a").Str("b").str(),
                "array of string at byte 41 has impossible length 3");
  // Arrays of arrays take at least 12 bytes each.
  ExpectRefused(Raw().Preamble(0, 1).Str("k").U32(9).U32(9).U64(1000).U64(0).str(),
                "array of array at byte 41 has impossible length 1000");
}

TEST(GgufCorruptionTest, UnknownValueTypes) {
  ExpectRefused(Raw().Preamble(0, 1).Str("xxx").U32(13).U64(0).str(),
                "mem.gguf: key 'xxx' at byte 24: unknown value type 13 at byte 35");
  ExpectRefused(Raw().Preamble(0, 1).Str("arr").U32(9).U32(0xFFFFFFFF).U64(0).str(),
                "key 'arr' at byte 24: unknown value type 4294967295");
  ExpectRefused(Raw().Preamble(0, 1).Str("b").U32(7).U8(2).str(),
                "key 'b' at byte 24: bool at byte 37 has value 2");
}

TEST(GgufCorruptionTest, NamesInMessagesAreEscapedAndShort) {
  // Names are raw bytes; a message must stay one readable line.
  ExpectRefused(Raw().Preamble(0, 1).Str("a\nb'c").U32(13).U64(0).str(),
                "key 'a\\nb\\'c' at byte 24: unknown value type 13");
  ExpectRefused(Raw().Preamble(0, 1).Str(std::string(5000, 'k')).U32(13).U64(0).str(),
                "...(5000 bytes)' at byte 24: unknown value type 13");
}

TEST(GgufCorruptionTest, NestingDepth) {
  auto nested = [](int depth) {
    Raw raw;
    raw.Preamble(0, 1).Str("deep").U32(9);
    for (int i = 1; i < depth; ++i) raw.U32(9).U64(1);  // array of one array ...
    raw.U32(0).U64(1).U8(42);                           // ... of one u8.
    return raw.str();
  };
  EXPECT_TRUE(ParseStatus(nested(8)).ok()) << ParseStatus(nested(8));
  ExpectRefused(nested(9), "key 'deep' at byte 24: arrays nested deeper than 8");
}

TEST(GgufCorruptionTest, DuplicateKeysAndTensorNames) {
  ExpectRefused(Raw().Preamble(0, 2).KvU32("k", 1).KvU32("k", 2).str(),
                "key 'k' at byte 41: duplicate metadata key");
  ExpectRefused(Raw().Preamble(2, 0).Tensor("t", {8}, 0, 0).Tensor("t", {8}, 0, 32).Data(64).str(),
                "tensor 't' at byte 57: duplicate tensor name");
}

TEST(GgufCorruptionTest, TensorShapeAndType) {
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {1, 1, 1, 1, 1}, 0, 0).Data(4).str(),
                "tensor 't' at byte 24: has 5 dimensions, at most 4 are allowed");
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {-1}, 0, 0).Data(4).str(),
                "tensor 't' at byte 24: dimension 0 is negative (-1)");
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {1 << 30, 1 << 30, 1 << 30}, 0, 0).Data(4).str(),
                "element count overflows int64");
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {int64_t{1} << 62}, 0, 0).Data(4).str(),
                "is not a multiple of the F32 block size");  // Bytes overflow.
  for (uint32_t type : {4u, 5u, 31u, 36u, 42u, 0xFFFFFFFFu}) {
    ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {32}, type, 0).Data(128).str(),
                  "tensor 't' at byte 24: unknown ggml tensor type " + std::to_string(type));
  }
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {16, 2}, 2, 0).Data(128).str(),
                "innermost dimension 16 is not a multiple of the Q4_0 block size 32");
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {32}, 12, 0).Data(1024).str(),
                "innermost dimension 32 is not a multiple of the Q4_K block size 256");
  // A file whose types we cannot compute with still opens.
  EXPECT_TRUE(ParseStatus(Raw().Preamble(1, 0).Tensor("t", {256}, 16, 0).Data(66).str()).ok());
  // Zero dims: a scalar.
  EXPECT_TRUE(ParseStatus(Raw().Preamble(1, 0).Tensor("t", {}, 0, 0).Data(4).str()).ok());
}

TEST(GgufCorruptionTest, ExtentsPastEndOfFile) {
  // Header: 24 bytes preamble + 8+1 name + 4 n_dims + 8 dim + 4 type + 8 offset = 57,
  // so data starts at 64.
  Raw raw;
  raw.Preamble(1, 0).Tensor("blk.0.attn_q.weight", {16}, 0, 1024).Data(64);
  ExpectRefused(raw.str(),
                "mem.gguf: tensor 'blk.0.attn_q.weight' at byte 24: data extent [1120, 1184) "
                "ends past end of file (size 160)");
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {16}, 0, 0).Data(63).str(),
                "data extent [64, 128) ends past end of file (size 127)");
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {16}, 0, ~uint64_t{0} - 31).Data(64).str(),
                "overflows");
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {int64_t{1} << 60}, 24, 0).Data(64).str(),
                "ends past end of file");
}

TEST(GgufCorruptionTest, MisalignedAndOverlappingTensors) {
  ExpectRefused(Raw().Preamble(1, 0).Tensor("t", {16}, 0, 4).Data(128).str(),
                "tensor 't' at byte 24: data offset 4 is not a multiple of the alignment 32");
  ExpectRefused(
      Raw().Preamble(2, 0).Tensor("a", {16}, 0, 0).Tensor("b", {16}, 0, 32).Data(128).str(),
      "tensor 'b' at byte 57: data extent [128, 192) overlaps tensor 'a' [96, 160)");
  // Same offset, listed in reverse order.
  ExpectRefused(
      Raw().Preamble(2, 0).Tensor("a", {16}, 0, 64).Tensor("b", {8}, 0, 64).Data(128).str(),
      "overlaps tensor");
  // Empty tensors own no bytes and overlap nothing.
  EXPECT_TRUE(
      ParseStatus(
          Raw().Preamble(2, 0).Tensor("a", {16}, 0, 0).Tensor("b", {0}, 0, 32).Data(64).str())
          .ok());
}

TEST(GgufCorruptionTest, Alignment) {
  auto with_alignment = [](uint32_t type, uint64_t value, uint64_t offset) {
    Raw raw;
    raw.Preamble(1, 1).Str("general.alignment").U32(type);
    type == 10 ? raw.U64(value) : raw.U32(static_cast<uint32_t>(value));
    raw.Tensor("t", {16}, 0, offset).Data(offset + 64, 64);
    return raw.str();
  };
  EXPECT_TRUE(ParseStatus(with_alignment(4, 64, 64)).ok());
  {
    StringFile file(with_alignment(4, 64, 64));
    EXPECT_EQ(GgufFile::Parse(file).value()->alignment(), 64u);
    EXPECT_EQ(GgufFile::Parse(file).value()->data_offset(), 128u);
  }
  ExpectRefused(with_alignment(4, 64, 32), "data offset 32 is not a multiple of the alignment 64");
  ExpectRefused(with_alignment(4, 0, 0),
                "key 'general.alignment': alignment 0 is not a power of two");
  ExpectRefused(with_alignment(4, 48, 0), "alignment 48 is not a power of two");
  ExpectRefused(with_alignment(10, uint64_t{1} << 40, 0), "is not a power of two between");
  ExpectRefused(with_alignment(6, 0x42000000, 0), "alignment has type float32");
}

// An I/O error keeps its code and gains the path and place.
class FailingFile final : public RandomAccessFile {
 public:
  absl::Status Read(uint64_t, size_t, char*) const override {
    return absl::DataLossError("EIO reading");
  }
  uint64_t Size() const override { return 1000; }
  const std::string& Path() const override { return path_; }
  bool Direct() const override { return false; }
  size_t Alignment() const override { return 1; }

 private:
  std::string path_ = "bad.gguf";
};

TEST(GgufCorruptionTest, ReadErrorsPassThrough) {
  FailingFile file;
  absl::Status s = GgufFile::Parse(file).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "bad.gguf: header at byte 0: EIO reading");
}

}  // namespace
}  // namespace waste::storage
