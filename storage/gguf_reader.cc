// GgufFile::Parse: reads and validates a GGUF header (v1, v2, v3).
//
// Layout (little-endian):
//   magic "GGUF", u32 version, n_tensors, n_kv,
//   n_kv x { string key, u32 value type, value },
//   n_tensors x { string name, u32 n_dims, n_dims x dim, u32 ggml type, u64 offset },
//   padding to the alignment, tensor data.
// Version 1 stores counts, string lengths, array lengths and dims as u32;
// later versions as 64-bit (dims signed).
//
// Nothing read from the file is trusted before it is checked: counts are
// bounded by the bytes left before anything is allocated, every size
// computation is overflow-checked, and every extent is checked against the
// file size.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/gguf.h"

namespace waste::storage {
namespace {

// Debian's Abseil has its own string_view type; StrCat and hash lookups
// need it spelled out.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

// Header reads are buffered in chunks of this size so that parsing a vocab of
// 150k strings does not cost 300k calls into the Env.
constexpr size_t kReadChunk = size_t{1} << 20;

// Nested arrays are allowed by the specification but never used by llama.cpp
// (its gguf.cpp refuses them); a small depth bound keeps a crafted file from
// exhausting the stack.
constexpr int kMaxArrayDepth = 8;

// Every parsed value (array elements included) costs ~100 bytes of memory
// while a u8 element costs one byte of file. This bounds what a crafted file
// can make us allocate; real files hold well under a million values.
constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 24;

// Sequential reader over the header with a read-ahead buffer.
class Cursor {
 public:
  explicit Cursor(const RandomAccessFile& file) : file_(file), size_(file.Size()) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Reads exactly n bytes at pos() and advances. Fails without reading when
  // the file is shorter.
  absl::Status Read(void* out, size_t n) {
    if (n > remaining()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected end of file: ", n, " bytes needed at byte ", pos_, ", file size ", size_));
    }
    if (pos_ >= buf_start_ && pos_ + n <= buf_start_ + buf_.size()) {
      std::memcpy(out, buf_.data() + (pos_ - buf_start_), n);
    } else if (n >= kReadChunk) {
      RETURN_IF_ERROR(file_.Read(pos_, n, static_cast<char*>(out)));
    } else {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(kReadChunk, remaining()));
      buf_.resize(len);
      buf_start_ = pos_;
      RETURN_IF_ERROR(file_.Read(pos_, len, buf_.data()));
      std::memcpy(out, buf_.data(), n);
    }
    pos_ += n;
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status ReadScalar(T* out) {
    return Read(out, sizeof(T));
  }

 private:
  const RandomAccessFile& file_;
  const uint64_t size_;
  uint64_t pos_ = 0;
  std::string buf_;
  uint64_t buf_start_ = 0;
};

// Bytes of one scalar value; 0 for string and array.
size_t ScalarSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

// A key or tensor name for a message: quoted, C-escaped (names are raw bytes
// from the file and may hold newlines) and cut short if very long, so that
// every error stays one readable line.
std::string Quoted(std::string_view name) {
  constexpr size_t kMaxShown = 200;
  std::string escaped = absl::Utf8SafeCEscape(Sv(name.substr(0, kMaxShown)));
  if (name.size() > kMaxShown) absl::StrAppend(&escaped, "...(", name.size(), " bytes)");
  return absl::StrCat("'", escaped, "'");
}

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

// Fills a GgufFile from the file's header. A friend of GgufFile.
class GgufParser {
 public:
  GgufParser(const RandomAccessFile& file, GgufFile* out) : cur_(file), out_(*out) {
    out_.path_ = file.Path();
    out_.file_size_ = file.Size();
    out_.disk_bytes_ = file.Size();
  }

  absl::Status Run() {
    RETURN_IF_ERROR(ReadPreamble());
    RETURN_IF_ERROR(ReadMetadata());
    RETURN_IF_ERROR(ReadAlignment());
    RETURN_IF_ERROR(ReadTensorInfos());
    return CheckTensorExtents();
  }

 private:
  absl::Status Fail(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(out_.path_, ": ", where_, ": ", Sv(what)));
  }
  // Prefixes an error from the cursor or the file with path and location,
  // keeping its code (an I/O error stays an I/O error).
  absl::Status Annotate(const absl::Status& status) const {
    return absl::Status(status.code(),
                        absl::StrCat(out_.path_, ": ", where_, ": ", status.message()));
  }

  uint64_t CountSize() const { return out_.version_ == 1 ? 4 : 8; }

  absl::StatusOr<uint64_t> ReadCount() {
    if (out_.version_ == 1) {
      uint32_t n = 0;
      RETURN_IF_ERROR(cur_.ReadScalar(&n));
      return n;
    }
    uint64_t n = 0;
    RETURN_IF_ERROR(cur_.ReadScalar(&n));
    return n;
  }

  // Reads a length-prefixed string; the length is checked against the bytes
  // left before allocating.
  absl::Status ReadString(std::string* out, std::string_view what) {
    const uint64_t at = cur_.pos();
    absl::StatusOr<uint64_t> len = ReadCount();
    if (!len.ok()) return Annotate(len.status());
    if (*len > cur_.remaining()) {
      return Fail(absl::StrCat(Sv(what), " length ", *len, " at byte ", at,
                               " runs past end of file (", cur_.remaining(), " bytes left)"));
    }
    out->resize(static_cast<size_t>(*len));
    absl::Status s = cur_.Read(out->data(), out->size());
    if (!s.ok()) return Annotate(s);
    return absl::OkStatus();
  }

  absl::Status ReadPreamble() {
    where_ = "header at byte 0";
    char magic[4];
    if (cur_.size() < 4) return Fail(absl::StrCat("not a GGUF file (", cur_.size(), " bytes)"));
    absl::Status s = cur_.Read(magic, 4);
    if (!s.ok()) return Annotate(s);
    if (std::memcmp(magic, kGgufMagic, 4) != 0) {
      return Fail("not a GGUF file (magic is not 'GGUF')");
    }
    where_ = "header at byte 4";
    uint32_t version = 0;
    s = cur_.ReadScalar(&version);
    if (!s.ok()) return Annotate(s);
    if (version == 0 || version > 3) {
      if (version != 0 && __builtin_bswap32(version) <= 3) {
        return Fail(absl::StrCat("big-endian GGUF (version ", __builtin_bswap32(version),
                                 ") is not supported"));
      }
      return Fail(absl::StrCat("unsupported GGUF version ", version, " (supported: 1, 2, 3)"));
    }
    out_.version_ = version;

    const uint64_t n_tensors_at = cur_.pos();
    where_ = absl::StrCat("header at byte ", n_tensors_at);
    absl::StatusOr<uint64_t> n_tensors = ReadCount();
    if (!n_tensors.ok()) return Annotate(n_tensors.status());
    const uint64_t n_kv_at = cur_.pos();
    where_ = absl::StrCat("header at byte ", n_kv_at);
    absl::StatusOr<uint64_t> n_kv = ReadCount();
    if (!n_kv.ok()) return Annotate(n_kv.status());

    // Smallest possible entries: a key (empty string) + type + a 1-byte
    // value; a tensor name + n_dims (0) + type + offset.
    const uint64_t min_kv = CountSize() + 4 + 1;
    const uint64_t min_tensor = CountSize() + 4 + 4 + 8;
    if (*n_tensors > cur_.remaining() / min_tensor) {
      where_ = absl::StrCat("header at byte ", n_tensors_at);
      return Fail(absl::StrCat("tensor count ", *n_tensors, " is impossible: ", cur_.remaining(),
                               " bytes follow and each tensor info takes at least ", min_tensor));
    }
    if (*n_kv > cur_.remaining() / min_kv) {
      return Fail(absl::StrCat("metadata count ", *n_kv, " is impossible: ", cur_.remaining(),
                               " bytes follow and each entry takes at least ", min_kv));
    }
    n_kv_ = *n_kv;
    n_tensors_ = *n_tensors;
    return absl::OkStatus();
  }

  absl::Status ReadMetadata() {
    out_.metadata_.reserve(static_cast<size_t>(n_kv_));
    for (uint64_t i = 0; i < n_kv_; ++i) {
      const uint64_t at = cur_.pos();
      where_ = absl::StrCat("metadata entry ", i, " at byte ", at);
      std::string key;
      RETURN_IF_ERROR(ReadString(&key, "key"));
      where_ = absl::StrCat("key ", Quoted(key), " at byte ", at);
      if (out_.metadata_index_.contains(key)) return Fail("duplicate metadata key");
      GgufValue value;
      RETURN_IF_ERROR(ReadTypedValue(0, &value));
      out_.metadata_index_.emplace(key, out_.metadata_.size());
      out_.metadata_.emplace_back(std::move(key), std::move(value));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<GgufValueType> ReadValueType() {
    const uint64_t at = cur_.pos();
    uint32_t type = 0;
    absl::Status s = cur_.ReadScalar(&type);
    if (!s.ok()) return Annotate(s);
    if (!IsValidGgufValueType(type)) {
      return Fail(absl::StrCat("unknown value type ", type, " at byte ", at,
                               " (the GGUF specification defines 0..12)"));
    }
    return static_cast<GgufValueType>(type);
  }

  absl::Status ReadTypedValue(int depth, GgufValue* out) {
    ASSIGN_OR_RETURN(GgufValueType type, ReadValueType());
    return ReadValue(type, depth, out);
  }

  // Least bytes one value of `type` takes in the file.
  uint64_t MinValueSize(GgufValueType type) const {
    if (type == GgufValueType::kString) return CountSize();
    if (type == GgufValueType::kArray) return 4 + CountSize();
    return ScalarSize(type);
  }

  absl::Status ReadValue(GgufValueType type, int depth, GgufValue* out) {
    if (++values_ > kMaxMetadataValues) {
      return Fail(absl::StrCat("more than ", kMaxMetadataValues, " metadata values in the file"));
    }
    out->type = type;
    const uint64_t at = cur_.pos();
    absl::Status s;
    switch (type) {
      case GgufValueType::kUint8: {
        uint8_t v = 0;
        s = cur_.ReadScalar(&v);
        out->u = v;
        break;
      }
      case GgufValueType::kBool: {
        uint8_t v = 0;
        s = cur_.ReadScalar(&v);
        if (s.ok() && v > 1) {
          return Fail(absl::StrCat("bool at byte ", at, " has value ", v, " (must be 0 or 1)"));
        }
        out->u = v;
        break;
      }
      case GgufValueType::kInt8: {
        int8_t v = 0;
        s = cur_.ReadScalar(&v);
        out->i = v;
        break;
      }
      case GgufValueType::kUint16: {
        uint16_t v = 0;
        s = cur_.ReadScalar(&v);
        out->u = v;
        break;
      }
      case GgufValueType::kInt16: {
        int16_t v = 0;
        s = cur_.ReadScalar(&v);
        out->i = v;
        break;
      }
      case GgufValueType::kUint32: {
        uint32_t v = 0;
        s = cur_.ReadScalar(&v);
        out->u = v;
        break;
      }
      case GgufValueType::kInt32: {
        int32_t v = 0;
        s = cur_.ReadScalar(&v);
        out->i = v;
        break;
      }
      case GgufValueType::kUint64: {
        s = cur_.ReadScalar(&out->u);
        break;
      }
      case GgufValueType::kInt64: {
        s = cur_.ReadScalar(&out->i);
        break;
      }
      case GgufValueType::kFloat32: {
        float v = 0;
        s = cur_.ReadScalar(&v);
        out->f = v;
        break;
      }
      case GgufValueType::kFloat64: {
        s = cur_.ReadScalar(&out->f);
        break;
      }
      case GgufValueType::kString:
        return ReadString(&out->str, "string");
      case GgufValueType::kArray:
        return ReadArray(depth, out);
    }
    if (!s.ok()) return Annotate(s);
    return absl::OkStatus();
  }

  absl::Status ReadArray(int depth, GgufValue* out) {
    if (depth >= kMaxArrayDepth) {
      return Fail(
          absl::StrCat("arrays nested deeper than ", kMaxArrayDepth, " at byte ", cur_.pos()));
    }
    ASSIGN_OR_RETURN(out->array_type, ReadValueType());
    const uint64_t at = cur_.pos();
    absl::StatusOr<uint64_t> count = ReadCount();
    if (!count.ok()) return Annotate(count.status());
    const uint64_t min_size = MinValueSize(out->array_type);
    if (*count > cur_.remaining() / min_size) {
      return Fail(absl::StrCat("array of ", GgufValueTypeName(out->array_type), " at byte ", at,
                               " has impossible length ", *count, ": ", cur_.remaining(),
                               " bytes follow, each element takes at least ", min_size));
    }
    if (*count > kMaxMetadataValues - std::min(values_, kMaxMetadataValues)) {
      return Fail(absl::StrCat("array at byte ", at, " has ", *count,
                               " elements, more than the reader's limit of ", kMaxMetadataValues,
                               " metadata values"));
    }
    out->array.resize(static_cast<size_t>(*count));
    for (GgufValue& element : out->array) {
      if (out->array_type == GgufValueType::kArray) {
        RETURN_IF_ERROR(ReadTypedArrayElement(depth + 1, &element));
      } else {
        RETURN_IF_ERROR(ReadValue(out->array_type, depth + 1, &element));
      }
    }
    return absl::OkStatus();
  }

  // An element of an array of arrays is itself an array header.
  absl::Status ReadTypedArrayElement(int depth, GgufValue* out) {
    out->type = GgufValueType::kArray;
    if (++values_ > kMaxMetadataValues) {
      return Fail(absl::StrCat("more than ", kMaxMetadataValues, " metadata values in the file"));
    }
    return ReadArray(depth, out);
  }

  absl::Status ReadAlignment() {
    out_.alignment_ = kGgufDefaultAlignment;
    auto it = out_.metadata_index_.find(kGgufAlignmentKey);
    if (it == out_.metadata_index_.end()) return absl::OkStatus();
    const GgufValue& v = out_.metadata_[it->second].second;
    where_ = absl::StrCat("key '", kGgufAlignmentKey, "'");
    uint64_t alignment = 0;
    switch (v.type) {
      case GgufValueType::kUint8:
      case GgufValueType::kUint16:
      case GgufValueType::kUint32:
      case GgufValueType::kUint64:
        alignment = v.u;
        break;
      case GgufValueType::kInt8:
      case GgufValueType::kInt16:
      case GgufValueType::kInt32:
      case GgufValueType::kInt64:
        alignment = v.i < 0 ? 0 : static_cast<uint64_t>(v.i);
        break;
      default:
        return Fail(absl::StrCat("alignment has type ", GgufValueTypeName(v.type),
                                 ", expected an integer (uint32)"));
    }
    // llama.cpp accepts any nonzero power of two held in a u32.
    if (!IsPowerOfTwo(alignment) || alignment > std::numeric_limits<uint32_t>::max()) {
      return Fail(
          absl::StrCat("alignment ", alignment, " is not a power of two between 1 and 2^31"));
    }
    out_.alignment_ = alignment;
    return absl::OkStatus();
  }

  absl::Status ReadTensorInfos() {
    out_.tensors_.reserve(static_cast<size_t>(n_tensors_));
    tensor_starts_.reserve(static_cast<size_t>(n_tensors_));
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      const uint64_t at = cur_.pos();
      where_ = absl::StrCat("tensor info ", i, " at byte ", at);
      TensorInfo t;
      RETURN_IF_ERROR(ReadString(&t.name, "tensor name"));
      where_ = absl::StrCat("tensor ", Quoted(t.name), " at byte ", at);
      if (out_.tensor_index_.contains(t.name)) return Fail("duplicate tensor name");

      uint32_t n_dims = 0;
      absl::Status s = cur_.ReadScalar(&n_dims);
      if (!s.ok()) return Annotate(s);
      if (n_dims > static_cast<uint32_t>(kGgufMaxDims)) {
        return Fail(
            absl::StrCat("has ", n_dims, " dimensions, at most ", kGgufMaxDims, " are allowed"));
      }
      t.shape.resize(n_dims);
      int64_t elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        int64_t dim = 0;
        if (out_.version_ == 1) {
          uint32_t dim32 = 0;
          s = cur_.ReadScalar(&dim32);
          dim = dim32;
        } else {
          s = cur_.ReadScalar(&dim);
        }
        if (!s.ok()) return Annotate(s);
        if (dim < 0) return Fail(absl::StrCat("dimension ", d, " is negative (", dim, ")"));
        if (dim != 0 && elements > std::numeric_limits<int64_t>::max() / dim) {
          return Fail("element count overflows int64");
        }
        elements *= dim;
        t.shape[d] = dim;
      }

      uint32_t type_id = 0;
      s = cur_.ReadScalar(&type_id);
      if (!s.ok()) return Annotate(s);
      std::optional<GgmlTypeTraits> traits = GetGgmlTypeTraits(type_id);
      if (!traits.has_value()) {
        return Fail(absl::StrCat("unknown ggml tensor type ", type_id));
      }
      t.type = traits->type;

      s = cur_.ReadScalar(&t.offset);  // Relative for now; made absolute later.
      if (!s.ok()) return Annotate(s);

      // ggml stores rows as whole blocks, so the innermost dimension must be
      // a multiple of the block size (which makes the total one too).
      const int64_t ne0 = t.shape.empty() ? 1 : t.shape[0];
      std::optional<uint64_t> row_bytes = GgmlRowSize(t.type, ne0);
      if (!row_bytes.has_value()) {
        return Fail(absl::StrCat("innermost dimension ", ne0, " is not a multiple of the ",
                                 Sv(traits->name), " block size ", traits->block_size));
      }
      const uint64_t rows = ne0 == 0 ? 0 : static_cast<uint64_t>(elements / ne0);
      if (rows != 0 && *row_bytes > std::numeric_limits<uint64_t>::max() / rows) {
        return Fail("byte size overflows 64 bits");
      }
      t.size = *row_bytes * rows;
      if (t.offset % out_.alignment_ != 0) {
        return Fail(absl::StrCat("data offset ", t.offset, " is not a multiple of the alignment ",
                                 out_.alignment_));
      }
      out_.tensor_index_.emplace(t.name, out_.tensors_.size());
      out_.tensors_.push_back(std::move(t));
      tensor_starts_.push_back(at);
    }
    return absl::OkStatus();
  }

  absl::Status CheckTensorExtents() {
    const uint64_t header_end = cur_.pos();
    // header_end <= file size < 2^64 - alignment in practice; check anyway.
    if (header_end > std::numeric_limits<uint64_t>::max() - (out_.alignment_ - 1)) {
      where_ = "header";
      return Fail("data offset overflows");
    }
    out_.data_offset_ = (header_end + out_.alignment_ - 1) / out_.alignment_ * out_.alignment_;
    const uint64_t file_size = cur_.size();
    for (size_t i = 0; i < out_.tensors_.size(); ++i) {
      TensorInfo& t = out_.tensors_[i];
      where_ = absl::StrCat("tensor ", Quoted(t.name), " at byte ", tensor_starts_[i]);
      const uint64_t rel = t.offset;
      if (rel > file_size || out_.data_offset_ > file_size - rel ||
          t.size > file_size - rel - out_.data_offset_) {
        // Report the extent as numbers only when they do not wrap.
        if (rel <= std::numeric_limits<uint64_t>::max() - out_.data_offset_ &&
            t.size <= std::numeric_limits<uint64_t>::max() - out_.data_offset_ - rel) {
          return Fail(absl::StrCat("data extent [", out_.data_offset_ + rel, ", ",
                                   out_.data_offset_ + rel + t.size,
                                   ") ends past end of file (size ", file_size, ")"));
        }
        return Fail(absl::StrCat("data offset ", rel, " + size ", t.size, " overflows, file size ",
                                 file_size));
      }
      t.offset = out_.data_offset_ + rel;
    }
    // No two tensors may share bytes. Empty tensors own no bytes.
    std::vector<size_t> order(out_.tensors_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return out_.tensors_[a].offset < out_.tensors_[b].offset;
    });
    const TensorInfo* prev = nullptr;
    for (size_t idx : order) {
      const TensorInfo& t = out_.tensors_[idx];
      if (t.size == 0) continue;
      if (prev != nullptr && t.offset < prev->offset + prev->size) {
        where_ = absl::StrCat("tensor ", Quoted(t.name), " at byte ", tensor_starts_[idx]);
        return Fail(absl::StrCat("data extent [", t.offset, ", ", t.offset + t.size,
                                 ") overlaps tensor ", Quoted(prev->name), " [", prev->offset, ", ",
                                 prev->offset + prev->size, ")"));
      }
      prev = &t;
    }
    return absl::OkStatus();
  }

  Cursor cur_;
  GgufFile& out_;
  // Where an error is: "key 'x' at byte N", "tensor 'y' at byte N", ...
  std::string where_;

  uint64_t n_kv_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t values_ = 0;
  std::vector<uint64_t> tensor_starts_;
};

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(const RandomAccessFile& file) {
  std::unique_ptr<GgufFile> gguf(new GgufFile());
  GgufParser parser(file, gguf.get());
  RETURN_IF_ERROR(parser.Run());
  return gguf;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, Parse(*file));
  RETURN_IF_ERROR(GgufSplitJoiner::Join(env, gguf.get()));
  return gguf;
}

}  // namespace waste::storage
