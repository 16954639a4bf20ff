// GgufWriter: writes GGUF files (v3 by default) in one forward pass without
// holding tensor data in memory, so a multi-GB synthetic model can be written
// through it.
//
// Usage:
//   std::string bytes;                  // or WritableFileSink over an Env file
//   StringSink sink(&bytes);
//   GgufWriter writer(&sink);
//   RETURN_IF_ERROR(writer.AddString("general.architecture", "llama"));
//   RETURN_IF_ERROR(writer.AddTensor("tok_embd.weight", GgmlType::kQ8_0, {64, 512}));
//   RETURN_IF_ERROR(writer.WriteHeader());
//   RETURN_IF_ERROR(writer.AppendTensorData("tok_embd.weight", chunk));  // any number of chunks
//   RETURN_IF_ERROR(writer.Finish());
//
// All metadata and tensor infos are added first (they form the header); then
// each tensor's bytes are streamed in the order the tensors were added. The
// writer pads every tensor to the alignment (as llama.cpp does, the file ends
// aligned too). Every error is sticky: after one, every call fails.
//
// Ownership: the writer does not own its sink, which must outlive it; it
// never closes or syncs it. Not thread-safe.
#ifndef WASTE_STORAGE_GGUF_WRITER_H_
#define WASTE_STORAGE_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/env.h"
#include "storage/ggml_types.h"
#include "storage/gguf.h"

namespace waste::storage {

// Where the writer's bytes go, in order.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual absl::Status Append(std::string_view data) = 0;
};

// Appends to a std::string it does not own (tests, small files).
class StringSink final : public ByteSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  absl::Status Append(std::string_view data) override {
    out_->append(data);
    return absl::OkStatus();
  }

 private:
  std::string* out_;
};

// Forwards to a WritableFile it does not own; the caller Syncs and Closes it.
class WritableFileSink final : public ByteSink {
 public:
  explicit WritableFileSink(WritableFile* file) : file_(file) {}
  absl::Status Append(std::string_view data) override { return file_->Append(data); }

 private:
  WritableFile* file_;
};

struct GgufWriterOptions {
  // Tensor data alignment: a power of two. Written as general.alignment
  // (u32) when it is not the default 32.
  uint64_t alignment = kGgufDefaultAlignment;
  // 3 (current). 1 and 2 exist to make test files in the old layouts
  // (version 1: 32-bit counts, lengths and dims).
  uint32_t version = 3;
};

class GgufWriter {
 public:
  explicit GgufWriter(ByteSink* sink, GgufWriterOptions options = {});
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata, in the order added. Before WriteHeader only. Keys must be
  // unique; general.alignment is set through the options, not here.
  // Array elements must all have the array's element type.
  absl::Status AddMetadata(std::string key, GgufValue value);
  absl::Status AddUint8(std::string key, uint8_t v);
  absl::Status AddInt8(std::string key, int8_t v);
  absl::Status AddUint16(std::string key, uint16_t v);
  absl::Status AddInt16(std::string key, int16_t v);
  absl::Status AddUint32(std::string key, uint32_t v);
  absl::Status AddInt32(std::string key, int32_t v);
  absl::Status AddUint64(std::string key, uint64_t v);
  absl::Status AddInt64(std::string key, int64_t v);
  absl::Status AddFloat32(std::string key, float v);
  absl::Status AddFloat64(std::string key, double v);
  absl::Status AddBool(std::string key, bool v);
  absl::Status AddString(std::string key, std::string v);
  absl::Status AddStringArray(std::string key, const std::vector<std::string>& v);
  absl::Status AddInt32Array(std::string key, const std::vector<int32_t>& v);
  absl::Status AddUint32Array(std::string key, const std::vector<uint32_t>& v);
  absl::Status AddInt64Array(std::string key, const std::vector<int64_t>& v);
  absl::Status AddFloat32Array(std::string key, const std::vector<float>& v);

  // Declares a tensor (ggml order: shape[0] innermost). Before WriteHeader
  // only. Names must be unique; 0..4 dims, each >= 0; shape[0] a multiple of
  // the type's block size. Returns the tensor's data size in bytes.
  absl::StatusOr<uint64_t> AddTensor(std::string name, GgmlType type, std::vector<int64_t> shape);

  // Writes magic, counts, metadata, tensor infos and the padding up to the
  // data section. Once.
  absl::Status WriteHeader();

  // Streams the next bytes of tensor `name`, which must be the first tensor
  // not yet complete (tensors are written in the order added). Chunks may
  // have any size; a tensor completes when its size is reached, and the
  // padding after it is written then. Empty tensors may be written (with an
  // empty chunk) or passed over.
  absl::Status AppendTensorData(std::string_view name, std::string_view chunk);

  // A whole tensor at once: `bytes` must be exactly its size.
  absl::Status WriteTensorData(std::string_view name, std::string_view bytes);

  // Checks that every tensor is complete (writes the header first if it was
  // not yet written, for files without tensors). Does not close the sink.
  absl::Status Finish();

  // Bytes handed to the sink so far.
  uint64_t bytes_written() const { return bytes_written_; }
  // Absolute offset of the data section; known after WriteHeader.
  uint64_t data_offset() const { return data_offset_; }
  // Absolute offset of tensor `name`'s data (after WriteHeader); -1 if absent.
  int64_t TensorOffset(std::string_view name) const;

 private:
  enum class State { kCollecting, kWritingData, kFinished, kFailed };

  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    uint64_t offset = 0;  // Relative to the data section.
    uint64_t size = 0;
  };

  absl::Status Fail(absl::Status status);
  absl::Status Emit(std::string_view bytes);
  absl::Status EmitPadding(uint64_t n);
  void AppendCount(std::string* out, uint64_t n) const;
  void AppendString(std::string* out, std::string_view s) const;
  void AppendValue(std::string* out, const GgufValue& v) const;

  ByteSink* sink_;
  GgufWriterOptions options_;
  State state_ = State::kCollecting;
  absl::Status error_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  absl::flat_hash_set<std::string> keys_;
  std::vector<PendingTensor> tensors_;
  absl::flat_hash_set<std::string> tensor_names_;
  uint64_t data_size_ = 0;  // Relative end of the last tensor, padded.
  uint64_t data_offset_ = 0;
  uint64_t bytes_written_ = 0;
  size_t current_ = 0;            // First tensor not yet complete.
  uint64_t current_written_ = 0;  // Bytes of it written so far.
};

}  // namespace waste::storage

#endif  // WASTE_STORAGE_GGUF_WRITER_H_
