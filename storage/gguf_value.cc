// GgufValue builders, typed metadata accessors and TensorInfo arithmetic.
// The parsing itself is in gguf_reader.cc.
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "storage/gguf.h"

namespace waste::storage {
namespace {

// Debian's Abseil has its own string_view type; StrCat and hash lookups
// need it spelled out.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 || t == GgufValueType::kUint32 ||
         t == GgufValueType::kUint64;
}

bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}

bool IsFloat(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

absl::Status WrongType(std::string_view key, const GgufValue& value, std::string_view wanted) {
  std::string have = GgufValueTypeName(value.type);
  if (value.type == GgufValueType::kArray) {
    absl::StrAppend(&have, " of ", GgufValueTypeName(value.array_type));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("metadata key '", Sv(key), "' has type ", have, ", expected ", Sv(wanted)));
}

// Integer value as int64 when it fits.
std::optional<int64_t> AsInt64(const GgufValue& v) {
  if (IsSigned(v.type)) return v.i;
  if (IsUnsigned(v.type) && v.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(v.u);
  }
  return std::nullopt;
}

}  // namespace

const char* GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

bool IsValidGgufValueType(uint32_t type) {
  return type <= static_cast<uint32_t>(GgufValueType::kFloat64);
}

GgufValue GgufValue::Uint8(uint8_t v) {
  GgufValue value;
  value.type = GgufValueType::kUint8;
  value.u = v;
  return value;
}
GgufValue GgufValue::Uint16(uint16_t v) {
  GgufValue value;
  value.type = GgufValueType::kUint16;
  value.u = v;
  return value;
}
GgufValue GgufValue::Uint32(uint32_t v) {
  GgufValue value;
  value.type = GgufValueType::kUint32;
  value.u = v;
  return value;
}
GgufValue GgufValue::Uint64(uint64_t v) {
  GgufValue value;
  value.type = GgufValueType::kUint64;
  value.u = v;
  return value;
}
GgufValue GgufValue::Bool(bool v) {
  GgufValue value;
  value.type = GgufValueType::kBool;
  value.u = v ? 1 : 0;
  return value;
}
GgufValue GgufValue::Int8(int8_t v) {
  GgufValue value;
  value.type = GgufValueType::kInt8;
  value.i = v;
  return value;
}
GgufValue GgufValue::Int16(int16_t v) {
  GgufValue value;
  value.type = GgufValueType::kInt16;
  value.i = v;
  return value;
}
GgufValue GgufValue::Int32(int32_t v) {
  GgufValue value;
  value.type = GgufValueType::kInt32;
  value.i = v;
  return value;
}
GgufValue GgufValue::Int64(int64_t v) {
  GgufValue value;
  value.type = GgufValueType::kInt64;
  value.i = v;
  return value;
}
GgufValue GgufValue::Float32(float v) {
  GgufValue value;
  value.type = GgufValueType::kFloat32;
  value.f = v;
  return value;
}
GgufValue GgufValue::Float64(double v) {
  GgufValue value;
  value.type = GgufValueType::kFloat64;
  value.f = v;
  return value;
}
GgufValue GgufValue::String(std::string v) {
  GgufValue value;
  value.type = GgufValueType::kString;
  value.str = std::move(v);
  return value;
}
GgufValue GgufValue::Array(GgufValueType element_type, std::vector<GgufValue> elements) {
  GgufValue value;
  value.type = GgufValueType::kArray;
  value.array_type = element_type;
  value.array = std::move(elements);
  return value;
}

int64_t TensorInfo::NumElements() const {
  // The reader has checked that the product fits in int64.
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorInfo::NumRows() const {
  if (shape.empty()) return 1;
  if (shape[0] == 0) return 0;
  return NumElements() / shape[0];
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(Sv(key));
  if (it == metadata_index_.end()) return nullptr;
  return &metadata_[it->second].second;
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(Sv(name));
  if (it == tensor_index_.end()) return nullptr;
  return &tensors_[it->second];
}

namespace {

absl::StatusOr<const GgufValue*> FindOrNotFound(const GgufFile& file, std::string_view key) {
  const GgufValue* value = file.Find(key);
  if (value == nullptr) {
    return absl::NotFoundError(absl::StrCat(file.path(), ": no metadata key '", Sv(key), "'"));
  }
  return value;
}

}  // namespace

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = FindOrNotFound(*this, key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufValueType::kString) return WrongType(key, **v, "string");
  return (*v)->str;
}

absl::StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = FindOrNotFound(*this, key);
  if (!v.ok()) return v.status();
  if (IsUnsigned((*v)->type)) return (*v)->u;
  if (IsSigned((*v)->type) && (*v)->i >= 0) return static_cast<uint64_t>((*v)->i);
  return WrongType(key, **v, "a non-negative integer");
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = FindOrNotFound(*this, key);
  if (!v.ok()) return v.status();
  std::optional<int64_t> i = AsInt64(**v);
  if (!i.has_value()) return WrongType(key, **v, "an integer that fits in int64");
  return *i;
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = FindOrNotFound(*this, key);
  if (!v.ok()) return v.status();
  if (!IsFloat((*v)->type)) return WrongType(key, **v, "float32 or float64");
  return (*v)->f;
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = FindOrNotFound(*this, key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufValueType::kBool) return WrongType(key, **v, "bool");
  return (*v)->u != 0;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = FindOrNotFound(*this, key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufValueType::kArray || (*v)->array_type != GgufValueType::kString) {
    return WrongType(key, **v, "array of string");
  }
  std::vector<std::string> out;
  out.reserve((*v)->array.size());
  for (const GgufValue& e : (*v)->array) out.push_back(e.str);
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = FindOrNotFound(*this, key);
  if (!v.ok()) return v.status();
  const GgufValueType et = (*v)->array_type;
  if ((*v)->type != GgufValueType::kArray || !(IsSigned(et) || IsUnsigned(et))) {
    return WrongType(key, **v, "array of integers");
  }
  std::vector<int64_t> out;
  out.reserve((*v)->array.size());
  for (size_t i = 0; i < (*v)->array.size(); ++i) {
    std::optional<int64_t> x = AsInt64((*v)->array[i]);
    if (!x.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata key '", Sv(key), "' element ", i, " does not fit in int64"));
    }
    out.push_back(*x);
  }
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = FindOrNotFound(*this, key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufValueType::kArray || !IsFloat((*v)->array_type)) {
    return WrongType(key, **v, "array of float32 or float64");
  }
  std::vector<float> out;
  out.reserve((*v)->array.size());
  for (const GgufValue& e : (*v)->array) out.push_back(static_cast<float>(e.f));
  return out;
}

}  // namespace waste::storage
