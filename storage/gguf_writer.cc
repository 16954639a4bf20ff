#include "storage/gguf_writer.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace waste::storage {
namespace {

// Debian's Abseil has its own string_view type; StrCat needs it spelled out.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// The reader refuses deeper nesting; never write what we cannot read.
constexpr int kMaxArrayDepth = 8;

template <typename T>
void AppendLE(std::string* out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out->append(bytes, sizeof(T));
}

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

uint64_t AlignUp(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

absl::Status CheckValue(std::string_view key, const GgufValue& v, int depth) {
  if (v.type == GgufValueType::kBool && v.u > 1) {
    return absl::InvalidArgumentError(absl::StrCat("key '", Sv(key), "': bool value ", v.u));
  }
  if (v.type != GgufValueType::kArray) return absl::OkStatus();
  if (depth >= kMaxArrayDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", Sv(key), "': arrays nested deeper than ", kMaxArrayDepth));
  }
  for (const GgufValue& e : v.array) {
    if (e.type != v.array_type) {
      return absl::InvalidArgumentError(
          absl::StrCat("key '", Sv(key), "': array of ", GgufValueTypeName(v.array_type),
                       " holds an element of type ", GgufValueTypeName(e.type)));
    }
    RETURN_IF_ERROR(CheckValue(key, e, depth + 1));
  }
  return absl::OkStatus();
}

template <typename T, typename Make>
GgufValue MakeArray(GgufValueType type, const std::vector<T>& v, Make make) {
  std::vector<GgufValue> elements;
  elements.reserve(v.size());
  for (const T& x : v) elements.push_back(make(x));
  return GgufValue::Array(type, std::move(elements));
}

}  // namespace

GgufWriter::GgufWriter(ByteSink* sink, GgufWriterOptions options) : sink_(sink), options_(options) {
  if (!IsPowerOfTwo(options_.alignment) ||
      options_.alignment > std::numeric_limits<uint32_t>::max()) {
    (void)Fail(absl::InvalidArgumentError(
        absl::StrCat("GGUF alignment ", options_.alignment, " is not a power of two < 2^32")));
  } else if (options_.version < 1 || options_.version > 3) {
    (void)Fail(absl::InvalidArgumentError(
        absl::StrCat("GGUF version ", options_.version, " cannot be written (1, 2 or 3)")));
  } else if (options_.alignment != kGgufDefaultAlignment) {
    metadata_.emplace_back(kGgufAlignmentKey,
                           GgufValue::Uint32(static_cast<uint32_t>(options_.alignment)));
    keys_.insert(kGgufAlignmentKey);
  }
}

absl::Status GgufWriter::Fail(absl::Status status) {
  if (state_ != State::kFailed) {
    state_ = State::kFailed;
    error_ = status;
  }
  return status;
}

absl::Status GgufWriter::AddMetadata(std::string key, GgufValue value) {
  if (state_ == State::kFailed) return error_;
  if (state_ != State::kCollecting) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("metadata key '", Sv(key), "' added after the header was written")));
  }
  if (key == kGgufAlignmentKey) {
    return Fail(absl::InvalidArgumentError(
        "set general.alignment through GgufWriterOptions::alignment, not as metadata"));
  }
  if (keys_.contains(key)) {
    return Fail(absl::AlreadyExistsError(absl::StrCat("duplicate metadata key '", Sv(key), "'")));
  }
  absl::Status s = CheckValue(key, value, 0);
  if (!s.ok()) return Fail(s);
  keys_.insert(key);
  metadata_.emplace_back(std::move(key), std::move(value));
  return absl::OkStatus();
}

absl::Status GgufWriter::AddUint8(std::string key, uint8_t v) {
  return AddMetadata(std::move(key), GgufValue::Uint8(v));
}
absl::Status GgufWriter::AddInt8(std::string key, int8_t v) {
  return AddMetadata(std::move(key), GgufValue::Int8(v));
}
absl::Status GgufWriter::AddUint16(std::string key, uint16_t v) {
  return AddMetadata(std::move(key), GgufValue::Uint16(v));
}
absl::Status GgufWriter::AddInt16(std::string key, int16_t v) {
  return AddMetadata(std::move(key), GgufValue::Int16(v));
}
absl::Status GgufWriter::AddUint32(std::string key, uint32_t v) {
  return AddMetadata(std::move(key), GgufValue::Uint32(v));
}
absl::Status GgufWriter::AddInt32(std::string key, int32_t v) {
  return AddMetadata(std::move(key), GgufValue::Int32(v));
}
absl::Status GgufWriter::AddUint64(std::string key, uint64_t v) {
  return AddMetadata(std::move(key), GgufValue::Uint64(v));
}
absl::Status GgufWriter::AddInt64(std::string key, int64_t v) {
  return AddMetadata(std::move(key), GgufValue::Int64(v));
}
absl::Status GgufWriter::AddFloat32(std::string key, float v) {
  return AddMetadata(std::move(key), GgufValue::Float32(v));
}
absl::Status GgufWriter::AddFloat64(std::string key, double v) {
  return AddMetadata(std::move(key), GgufValue::Float64(v));
}
absl::Status GgufWriter::AddBool(std::string key, bool v) {
  return AddMetadata(std::move(key), GgufValue::Bool(v));
}
absl::Status GgufWriter::AddString(std::string key, std::string v) {
  return AddMetadata(std::move(key), GgufValue::String(std::move(v)));
}
absl::Status GgufWriter::AddStringArray(std::string key, const std::vector<std::string>& v) {
  return AddMetadata(std::move(key), MakeArray(GgufValueType::kString, v, GgufValue::String));
}
absl::Status GgufWriter::AddInt32Array(std::string key, const std::vector<int32_t>& v) {
  return AddMetadata(std::move(key), MakeArray(GgufValueType::kInt32, v, GgufValue::Int32));
}
absl::Status GgufWriter::AddUint32Array(std::string key, const std::vector<uint32_t>& v) {
  return AddMetadata(std::move(key), MakeArray(GgufValueType::kUint32, v, GgufValue::Uint32));
}
absl::Status GgufWriter::AddInt64Array(std::string key, const std::vector<int64_t>& v) {
  return AddMetadata(std::move(key), MakeArray(GgufValueType::kInt64, v, GgufValue::Int64));
}
absl::Status GgufWriter::AddFloat32Array(std::string key, const std::vector<float>& v) {
  return AddMetadata(std::move(key), MakeArray(GgufValueType::kFloat32, v, GgufValue::Float32));
}

absl::StatusOr<uint64_t> GgufWriter::AddTensor(std::string name, GgmlType type,
                                               std::vector<int64_t> shape) {
  if (state_ == State::kFailed) return error_;
  auto bad = [&](std::string_view what) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("tensor '", Sv(name), "': ", Sv(what))));
  };
  if (state_ != State::kCollecting) return bad("added after the header was written");
  if (tensor_names_.contains(name)) {
    return Fail(absl::AlreadyExistsError(absl::StrCat("duplicate tensor name '", Sv(name), "'")));
  }
  if (shape.size() > static_cast<size_t>(kGgufMaxDims)) {
    return bad(absl::StrCat(shape.size(), " dimensions, at most ", kGgufMaxDims));
  }
  std::optional<GgmlTypeTraits> traits = GetGgmlTypeTraits(static_cast<uint32_t>(type));
  if (!traits.has_value()) {
    return bad(absl::StrCat("unknown ggml type ", static_cast<uint32_t>(type)));
  }
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) return bad(absl::StrCat("negative dimension ", d));
    if (d != 0 && elements > std::numeric_limits<int64_t>::max() / d) {
      return bad("element count overflows int64");
    }
    elements *= d;
  }
  const int64_t ne0 = shape.empty() ? 1 : shape[0];
  std::optional<uint64_t> row = GgmlRowSize(type, ne0);
  if (!row.has_value()) {
    return bad(absl::StrCat("innermost dimension ", ne0, " is not a multiple of the ",
                            Sv(traits->name), " block size ", traits->block_size));
  }
  const uint64_t rows = ne0 == 0 ? 0 : static_cast<uint64_t>(elements / ne0);
  if (rows != 0 && *row > std::numeric_limits<uint64_t>::max() / rows) {
    return bad("byte size overflows");
  }
  const uint64_t size = *row * rows;
  const uint64_t offset = data_size_;
  if (size > std::numeric_limits<uint64_t>::max() / 2 - offset) return bad("data too large");
  data_size_ = AlignUp(offset + size, options_.alignment);
  tensor_names_.insert(name);
  tensors_.push_back(PendingTensor{std::move(name), type, std::move(shape), offset, size});
  return size;
}

void GgufWriter::AppendCount(std::string* out, uint64_t n) const {
  if (options_.version == 1) {
    AppendLE<uint32_t>(out, static_cast<uint32_t>(n));
  } else {
    AppendLE<uint64_t>(out, n);
  }
}

void GgufWriter::AppendString(std::string* out, std::string_view s) const {
  AppendCount(out, s.size());
  out->append(s);
}

void GgufWriter::AppendValue(std::string* out, const GgufValue& v) const {
  switch (v.type) {
    case GgufValueType::kUint8:
    case GgufValueType::kBool:
      AppendLE<uint8_t>(out, static_cast<uint8_t>(v.u));
      break;
    case GgufValueType::kInt8:
      AppendLE<int8_t>(out, static_cast<int8_t>(v.i));
      break;
    case GgufValueType::kUint16:
      AppendLE<uint16_t>(out, static_cast<uint16_t>(v.u));
      break;
    case GgufValueType::kInt16:
      AppendLE<int16_t>(out, static_cast<int16_t>(v.i));
      break;
    case GgufValueType::kUint32:
      AppendLE<uint32_t>(out, static_cast<uint32_t>(v.u));
      break;
    case GgufValueType::kInt32:
      AppendLE<int32_t>(out, static_cast<int32_t>(v.i));
      break;
    case GgufValueType::kFloat32:
      AppendLE<float>(out, static_cast<float>(v.f));
      break;
    case GgufValueType::kUint64:
      AppendLE<uint64_t>(out, v.u);
      break;
    case GgufValueType::kInt64:
      AppendLE<int64_t>(out, v.i);
      break;
    case GgufValueType::kFloat64:
      AppendLE<double>(out, v.f);
      break;
    case GgufValueType::kString:
      AppendString(out, v.str);
      break;
    case GgufValueType::kArray:
      AppendLE<uint32_t>(out, static_cast<uint32_t>(v.array_type));
      AppendCount(out, v.array.size());
      for (const GgufValue& e : v.array) AppendValue(out, e);
      break;
  }
}

absl::Status GgufWriter::Emit(std::string_view bytes) {
  absl::Status s = sink_->Append(bytes);
  if (!s.ok()) return Fail(s);
  bytes_written_ += bytes.size();
  return absl::OkStatus();
}

absl::Status GgufWriter::EmitPadding(uint64_t n) {
  static constexpr char kZeros[256] = {};
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof(kZeros)));
    RETURN_IF_ERROR(Emit(std::string_view(kZeros, chunk)));
    n -= chunk;
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteHeader() {
  if (state_ == State::kFailed) return error_;
  if (state_ != State::kCollecting) {
    return Fail(absl::FailedPreconditionError("GGUF header written twice"));
  }
  // Version 1 has 32-bit counts and lengths; refuse what would not fit.
  if (options_.version == 1) {
    const uint64_t max32 = std::numeric_limits<uint32_t>::max();
    for (const PendingTensor& t : tensors_) {
      for (int64_t d : t.shape) {
        if (static_cast<uint64_t>(d) > max32) {
          return Fail(absl::InvalidArgumentError(
              absl::StrCat("tensor '", t.name, "': dimension ", d, " does not fit GGUF v1")));
        }
      }
    }
  }
  std::string header(kGgufMagic, sizeof(kGgufMagic));
  AppendLE<uint32_t>(&header, options_.version);
  AppendCount(&header, tensors_.size());
  AppendCount(&header, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    AppendString(&header, key);
    AppendLE<uint32_t>(&header, static_cast<uint32_t>(value.type));
    AppendValue(&header, value);
  }
  for (const PendingTensor& t : tensors_) {
    AppendString(&header, t.name);
    AppendLE<uint32_t>(&header, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) {
      if (options_.version == 1) {
        AppendLE<uint32_t>(&header, static_cast<uint32_t>(d));
      } else {
        AppendLE<int64_t>(&header, d);
      }
    }
    AppendLE<uint32_t>(&header, static_cast<uint32_t>(t.type));
    AppendLE<uint64_t>(&header, t.offset);
  }
  data_offset_ = AlignUp(header.size(), options_.alignment);
  RETURN_IF_ERROR(Emit(header));
  // Files without tensors end right after the header, as llama.cpp's do.
  if (!tensors_.empty()) RETURN_IF_ERROR(EmitPadding(data_offset_ - header.size()));
  state_ = State::kWritingData;
  current_ = 0;
  current_written_ = 0;
  return absl::OkStatus();
}

absl::Status GgufWriter::AppendTensorData(std::string_view name, std::string_view chunk) {
  if (state_ == State::kFailed) return error_;
  if (state_ != State::kWritingData) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("tensor '", Sv(name), "': data written before the header or after Finish")));
  }
  if (current_ >= tensors_.size()) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("tensor '", Sv(name), "': every tensor's data is already written")));
  }
  // Empty tensors have no bytes: callers may name them or pass over them.
  while (current_ + 1 < tensors_.size() && tensors_[current_].size == 0 &&
         tensors_[current_].name != name) {
    ++current_;
  }
  PendingTensor& t = tensors_[current_];
  if (name != t.name) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "tensor '", Sv(name), "' written out of order: tensor '", t.name, "' comes next")));
  }
  if (chunk.size() > t.size - current_written_) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("tensor '", Sv(name),
                                                        "': ", current_written_ + chunk.size(),
                                                        " bytes written, its size is ", t.size)));
  }
  RETURN_IF_ERROR(Emit(chunk));
  current_written_ += chunk.size();
  if (current_written_ == t.size) {
    RETURN_IF_ERROR(EmitPadding(AlignUp(t.size, options_.alignment) - t.size));
    ++current_;
    current_written_ = 0;
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteTensorData(std::string_view name, std::string_view bytes) {
  if (state_ == State::kWritingData && current_ < tensors_.size() &&
      tensors_[current_].name == name &&
      (current_written_ != 0 || bytes.size() != tensors_[current_].size)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("tensor '", Sv(name), "': WriteTensorData got ", bytes.size(),
                     " bytes, the tensor is ", tensors_[current_].size)));
  }
  return AppendTensorData(name, bytes);
}

absl::Status GgufWriter::Finish() {
  if (state_ == State::kFailed) return error_;
  if (state_ == State::kCollecting) RETURN_IF_ERROR(WriteHeader());
  if (state_ == State::kFinished) return absl::OkStatus();
  while (current_ < tensors_.size() && tensors_[current_].size == 0) ++current_;
  if (current_ < tensors_.size()) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("Finish before tensor '", tensors_[current_].name, "' was complete (",
                     current_written_, " of ", tensors_[current_].size, " bytes)")));
  }
  state_ = State::kFinished;
  return absl::OkStatus();
}

int64_t GgufWriter::TensorOffset(std::string_view name) const {
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) return static_cast<int64_t>(data_offset_ + t.offset);
  }
  return -1;
}

}  // namespace waste::storage
