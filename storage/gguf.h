// GGUF files (versions 1, 2 and 3) as llama.cpp writes them: metadata,
// tensor index and data extents. This module knows bytes, types and extents;
// it knows nothing of layers or experts.
//
// GgufFile::Open checks every count, string length, dimension, type and
// extent against the file before anything trusts it; a bad file is refused
// with one error naming what is wrong and where (key or tensor, byte offset):
//   stories.gguf: tensor 'blk.0.attn_q.weight' at byte 1234: data extent
//   [x, y) ends past end of file (size z)
// (one line; names are C-escaped). Format errors are INVALID_ARGUMENT; read
// errors keep the Env's code and gain the path and place.
//
// What is checked: magic; version 1..3 (v1: 32-bit counts, lengths, dims);
// counts and lengths against the bytes left (before allocating); value types
// 0..12 (others, e.g. 13, are refused, naming key and type); bool 0/1; arrays
// nested at most 8 deep; at most 2^24 metadata values in all; unique keys and
// tensor names; general.alignment (default 32) an integer power of two
// < 2^32; n_dims <= 4; dims >= 0 and their product within int64; tensor type
// defined by ggml (the type need not be one we can compute with); shape[0] a
// whole number of blocks; tensor offsets aligned; every extent inside the
// file without overflow; no two tensors sharing bytes.
//
// A GgufFile is immutable after Open and safe to share between threads.
#ifndef WASTE_STORAGE_GGUF_H_
#define WASTE_STORAGE_GGUF_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "storage/env.h"
#include "storage/ggml_types.h"

namespace waste::storage {

// Metadata value types, numbered as in the GGUF specification.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint8" .. "float64", as the GGUF specification names them; "type N" for
// numbers it does not define.
const char* GgufValueTypeName(GgufValueType type);

// True for the 13 types the specification defines.
bool IsValidGgufValueType(uint32_t type);

// The file's magic, first four bytes, and format constants llama.cpp uses.
inline constexpr char kGgufMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint64_t kGgufDefaultAlignment = 32;  // When general.alignment is absent.
inline constexpr char kGgufAlignmentKey[] = "general.alignment";
inline constexpr int kGgufMaxDims = 4;  // GGML_MAX_DIMS.

// One metadata value. Scalars are held widened; arrays hold their elements
// (nested arrays allowed).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;  // kUint*, kBool
  int64_t i = 0;   // kInt*
  double f = 0;    // kFloat*
  std::string str;
  GgufValueType array_type = GgufValueType::kUint8;  // For kArray.
  std::vector<GgufValue> array;

  // Builders, for writers and tests: GgufValue::Uint32(7).
  static GgufValue Uint8(uint8_t v);
  static GgufValue Int8(int8_t v);
  static GgufValue Uint16(uint16_t v);
  static GgufValue Int16(int16_t v);
  static GgufValue Uint32(uint32_t v);
  static GgufValue Int32(int32_t v);
  static GgufValue Float32(float v);
  static GgufValue Bool(bool v);
  static GgufValue String(std::string v);
  static GgufValue Uint64(uint64_t v);
  static GgufValue Int64(int64_t v);
  static GgufValue Float64(double v);
  // Every element must have type `element_type` (the writer checks).
  static GgufValue Array(GgufValueType element_type, std::vector<GgufValue> elements);

  friend bool operator==(const GgufValue& a, const GgufValue& b) = default;
};

// One tensor's index entry.
struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  // Dimensions, ggml order: shape[0] (ne0) is the innermost, contiguous one.
  std::vector<int64_t> shape;
  // Absolute byte offset in the file, and byte size.
  uint64_t offset = 0;
  uint64_t size = 0;

  int64_t NumElements() const;
  // Rows = product of shape[1..]; each row holds shape[0] elements.
  int64_t NumRows() const;
};

class GgufFile;

// Joins a split model's parts into its first part's GgufFile (split_gguf.cc).
class GgufSplitJoiner {
 public:
  static absl::Status Join(Env* env, GgufFile* first);
};

class GgufFile {
 public:
  // Opens and validates `path`, read through `env`. When it is the first
  // part of a model split by gguf-split, every part is opened, checked and
  // its tensors listed too, at their offsets in the joined address space
  // (split_gguf.h: read the data through OpenModelFile).
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(Env* env, const std::string& path);

  // Parses an already open file. Only the header is read (through
  // file.Read, in chunks of at most 1 MiB); tensor data is not touched.
  // `file` is not kept: the GgufFile owns no file handle.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(const RandomAccessFile& file);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Absolute offset where tensor data begins (of the first part).
  uint64_t data_offset() const { return data_offset_; }
  // The extent of the file, or of a split model's joined address space
  // (its parts and the holes between them).
  uint64_t file_size() const { return file_size_; }
  // Bytes on disk: the file's, or all of a split model's parts'.
  uint64_t disk_bytes() const { return disk_bytes_; }
  // Parts of a split model the file was opened as; 1 if not split.
  int split_count() const { return split_count_; }
  // The file's (a split model's first part's) path.
  const std::string& path() const { return path_; }

  // Metadata, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // Typed accessors: NOT_FOUND when the key is missing, INVALID_ARGUMENT
  // naming the key when its type does not fit (integers convert between
  // widths when the value fits; floats accept any float type).
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<uint64_t> GetUint(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;

  // Tensors, in file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

 private:
  friend class GgufParser;       // gguf_reader.cc fills the fields below,
  friend class GgufSplitJoiner;  // split_gguf.cc adds a split model's parts.
  GgufFile() = default;

  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t file_size_ = 0;
  uint64_t disk_bytes_ = 0;
  int split_count_ = 1;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  absl::flat_hash_map<std::string, size_t> metadata_index_;
  std::vector<TensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace waste::storage

#endif  // WASTE_STORAGE_GGUF_H_
