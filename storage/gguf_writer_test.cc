#include "storage/gguf_writer.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/gguf_testing.h"

namespace waste::storage {
namespace {

using ::testing::HasSubstr;
using ::waste::storage::testing::StringFile;

// Counts bytes without keeping them: the writer must stream.
class CountingSink final : public ByteSink {
 public:
  absl::Status Append(std::string_view data) override {
    total_ += data.size();
    largest_ = std::max(largest_, data.size());
    return absl::OkStatus();
  }
  uint64_t total_ = 0;
  size_t largest_ = 0;
};

class FailingSink final : public ByteSink {
 public:
  absl::Status Append(std::string_view) override {
    return absl::ResourceExhaustedError("disk full");
  }
};

// A WritableFile over a string, to exercise WritableFileSink.
class StringWritableFile final : public WritableFile {
 public:
  absl::Status Append(std::string_view data) override {
    bytes_.append(data);
    return absl::OkStatus();
  }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::Status Close() override { return absl::OkStatus(); }
  uint64_t Size() const override { return bytes_.size(); }
  std::string bytes_;
};

TEST(GgufWriterTest, StreamsLargeTensorsInChunks) {
  CountingSink sink;
  GgufWriter w(&sink);
  // 4 GiB of Q4_K described, streamed in 1 MiB chunks.
  const int64_t cols = 4096, rows = 4096 * 64;
  absl::StatusOr<uint64_t> size = w.AddTensor("big", GgmlType::kQ4_K, {cols, rows});
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, uint64_t{16} * 144 * rows);
  ASSERT_TRUE(w.WriteHeader().ok());
  const std::string chunk(1 << 20, 'x');
  uint64_t left = *size;
  while (left > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    ASSERT_TRUE(w.AppendTensorData("big", std::string_view(chunk).substr(0, n)).ok());
    left -= n;
  }
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_EQ(sink.total_, w.data_offset() + *size);
  EXPECT_LE(sink.largest_, chunk.size());
}

TEST(GgufWriterTest, WritableFileSink) {
  StringWritableFile file;
  WritableFileSink sink(&file);
  GgufWriter w(&sink);
  ASSERT_TRUE(w.AddString("general.architecture", "llama").ok());
  ASSERT_TRUE(w.AddTensor("t", GgmlType::kF32, {4}).ok());
  ASSERT_TRUE(w.WriteHeader().ok());
  ASSERT_TRUE(w.WriteTensorData("t", std::string(16, '\1')).ok());
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_EQ(file.Size(), w.bytes_written());
  StringFile in(file.bytes_);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Parse(in);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tensors()[0].offset, w.data_offset());
}

TEST(GgufWriterTest, EmptyTensorsMayBeNamedOrPassedOver) {
  std::string bytes;
  StringSink sink(&bytes);
  GgufWriter w(&sink);
  ASSERT_TRUE(w.AddTensor("e1", GgmlType::kF32, {0}).ok());
  ASSERT_TRUE(w.AddTensor("a", GgmlType::kF32, {4}).ok());
  ASSERT_TRUE(w.AddTensor("e2", GgmlType::kQ8_0, {32, 0}).ok());
  ASSERT_TRUE(w.AddTensor("e3", GgmlType::kF16, {0, 2}).ok());
  ASSERT_TRUE(w.AddTensor("b", GgmlType::kF32, {2}).ok());
  ASSERT_TRUE(w.WriteHeader().ok());
  ASSERT_TRUE(w.WriteTensorData("a", std::string(16, 'a')).ok());  // Passes over e1.
  ASSERT_TRUE(w.WriteTensorData("e2", "").ok());                   // Names e2.
  ASSERT_TRUE(w.WriteTensorData("b", std::string(8, 'b')).ok());   // Passes over e3.
  ASSERT_TRUE(w.Finish().ok());
  StringFile in(bytes);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Parse(in);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tensors().size(), 5u);
  EXPECT_EQ(bytes.substr((*f)->FindTensor("b")->offset, 8), std::string(8, 'b'));
}

TEST(GgufWriterTest, NoTensorsEndsAfterHeader) {
  std::string bytes;
  StringSink sink(&bytes);
  GgufWriter w(&sink);
  ASSERT_TRUE(w.AddUint32("k", 1).ok());
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_EQ(bytes.size(), 4u + 4 + 8 + 8 + (8 + 1) + 4 + 4);
  EXPECT_EQ(bytes.substr(0, 4), "GGUF");
}

TEST(GgufWriterTest, RefusesBadInput) {
  std::string bytes;
  StringSink sink(&bytes);
  {
    GgufWriter w(&sink);
    ASSERT_TRUE(w.AddUint32("k", 1).ok());
    absl::Status s = w.AddUint32("k", 2);
    EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
    EXPECT_THAT(std::string(s.message()), HasSubstr("duplicate metadata key 'k'"));
    // Errors are sticky.
    EXPECT_FALSE(w.AddUint32("other", 2).ok());
    EXPECT_FALSE(w.Finish().ok());
  }
  auto first_error = [&](auto&& fn) {
    GgufWriter w(&sink);
    return std::string(fn(w).message());
  };
  EXPECT_THAT(first_error([](GgufWriter& w) { return w.AddUint32("general.alignment", 64); }),
              HasSubstr("GgufWriterOptions::alignment"));
  EXPECT_THAT(first_error([](GgufWriter& w) {
                return w.AddMetadata(
                    "a", GgufValue::Array(GgufValueType::kInt32, {GgufValue::Uint8(1)}));
              }),
              HasSubstr("array of int32 holds an element of type uint8"));
  EXPECT_THAT(first_error([](GgufWriter& w) {
                (void)w.AddTensor("t", GgmlType::kF32, {4});
                return w.AddTensor("t", GgmlType::kF32, {4}).status();
              }),
              HasSubstr("duplicate tensor name 't'"));
  EXPECT_THAT(
      first_error([](GgufWriter& w) { return w.AddTensor("t", GgmlType::kQ4_0, {16}).status(); }),
      HasSubstr("not a multiple of the Q4_0 block size 32"));
  EXPECT_THAT(first_error([](GgufWriter& w) {
                return w.AddTensor("t", GgmlType::kF32, {1, 1, 1, 1, 1}).status();
              }),
              HasSubstr("5 dimensions"));
  EXPECT_THAT(first_error([](GgufWriter& w) {
                return w.AddTensor("t", static_cast<GgmlType>(4), {32}).status();
              }),
              HasSubstr("unknown ggml type 4"));
  EXPECT_THAT(first_error([](GgufWriter& w) {
                (void)w.AddTensor("a", GgmlType::kF32, {4});
                (void)w.AddTensor("b", GgmlType::kF32, {4});
                (void)w.WriteHeader();
                return w.AppendTensorData("b", "x");
              }),
              HasSubstr("tensor 'b' written out of order: tensor 'a' comes next"));
  EXPECT_THAT(first_error([](GgufWriter& w) {
                (void)w.AddTensor("a", GgmlType::kF32, {4});
                (void)w.WriteHeader();
                return w.WriteTensorData("a", "short");
              }),
              HasSubstr("WriteTensorData got 5 bytes, the tensor is 16"));
  EXPECT_THAT(first_error([](GgufWriter& w) {
                (void)w.AddTensor("a", GgmlType::kF32, {4});
                (void)w.WriteHeader();
                (void)w.AppendTensorData("a", "12345678");
                return w.Finish();
              }),
              HasSubstr("Finish before tensor 'a' was complete (8 of 16 bytes)"));
  EXPECT_THAT(first_error([](GgufWriter& w) {
                (void)w.WriteHeader();
                return w.AddUint8("late", 1);
              }),
              HasSubstr("after the header was written"));
  {
    GgufWriter w(&sink, GgufWriterOptions{.alignment = 48});
    EXPECT_THAT(std::string(w.Finish().message()), HasSubstr("alignment 48"));
  }
}

TEST(GgufWriterTest, SinkErrorsAreReturnedAndSticky) {
  FailingSink sink;
  GgufWriter w(&sink);
  ASSERT_TRUE(w.AddTensor("t", GgmlType::kF32, {4}).ok());
  EXPECT_EQ(w.WriteHeader().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(w.WriteTensorData("t", std::string(16, 0)).code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace waste::storage
