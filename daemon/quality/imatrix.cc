#include "daemon/quality/imatrix.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace waste::quality {
namespace {

// Names longer than this are not tensor names: a corrupt length.
constexpr int32_t kMaxNameLength = 1 << 16;

void PutInt32(std::string* out, int32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);  // Little-endian hosts only (as GGUF).
  out->append(b, 4);
}

// A cursor over the file's bytes that checks every read against the end.
class Cursor {
 public:
  Cursor(std::string_view bytes, std::string_view source) : bytes_(bytes), source_(source) {}
  // (Debian's Abseil has its own string_view: StrCat takes std::string.)

  size_t offset() const { return pos_; }
  bool AtEnd() const { return pos_ == bytes_.size(); }

  absl::StatusOr<int32_t> Int32(std::string_view what) {
    int32_t v;
    RETURN_IF_ERROR(Bytes(&v, 4, what));
    return v;
  }
  absl::Status Bytes(void* dst, size_t n, std::string_view what) {
    if (bytes_.size() - pos_ < n) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_, ": truncated imatrix file: ", std::string(what), " at byte ", pos_,
                       " needs ", n, " bytes, ", bytes_.size() - pos_, " left"));
    }
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  absl::Status Error(std::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": not an imatrix file (llama.cpp's legacy format): ", std::string(message),
        " at byte ", pos_));
  }

 private:
  std::string_view bytes_;
  std::string source_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<float> ImatrixEntry::Importance() const {
  std::vector<float> out(values);
  if (ncall > 0) {
    for (float& v : out) v /= static_cast<float>(ncall);
  }
  return out;
}

const ImatrixEntry* ImportanceMatrix::Find(std::string_view name) const {
  auto it = entries.find(std::string(name));
  return it == entries.end() ? nullptr : &it->second;
}

std::string EncodeImatrix(const ImportanceMatrix& matrix) {
  std::string out;
  PutInt32(&out, static_cast<int32_t>(matrix.entries.size()));
  for (const auto& [name, entry] : matrix.entries) {
    PutInt32(&out, static_cast<int32_t>(name.size()));
    out.append(name);
    PutInt32(&out, entry.ncall);
    PutInt32(&out, static_cast<int32_t>(entry.values.size()));
    out.append(reinterpret_cast<const char*>(entry.values.data()),
               entry.values.size() * sizeof(float));
  }
  PutInt32(&out, matrix.last_call);
  PutInt32(&out, static_cast<int32_t>(matrix.dataset.size()));
  out.append(matrix.dataset);
  return out;
}

absl::StatusOr<ImportanceMatrix> DecodeImatrix(std::string_view bytes, std::string_view source) {
  Cursor in(bytes, source);
  ImportanceMatrix matrix;
  ASSIGN_OR_RETURN(const int32_t n_entries, in.Int32("the entry count"));
  if (n_entries < 1) return in.Error(absl::StrCat(n_entries, " entries"));
  for (int32_t i = 0; i < n_entries; ++i) {
    const std::string what = absl::StrCat("entry ", i + 1, " of ", n_entries);
    ASSIGN_OR_RETURN(const int32_t len, in.Int32(what));
    if (len < 1 || len > kMaxNameLength) {
      return in.Error(absl::StrCat(what, " has a name of ", len, " bytes"));
    }
    std::string name(len, '\0');
    RETURN_IF_ERROR(in.Bytes(name.data(), len, what));
    ImatrixEntry entry;
    ASSIGN_OR_RETURN(entry.ncall, in.Int32(name));
    ASSIGN_OR_RETURN(const int32_t nval, in.Int32(name));
    if (entry.ncall < 0 || nval < 1) {
      return in.Error(
          absl::StrCat("entry '", name, "' has ncall ", entry.ncall, " and ", nval, " values"));
    }
    if (static_cast<uint64_t>(nval) * 4 > bytes.size() - in.offset()) {
      return in.Error(absl::StrCat("entry '", name, "' claims ", nval, " values, more than the ",
                                   bytes.size() - in.offset(), " bytes left"));
    }
    entry.values.resize(nval);
    RETURN_IF_ERROR(in.Bytes(entry.values.data(), nval * sizeof(float), name));
    for (int32_t j = 0; j < nval; ++j) {
      if (!std::isfinite(entry.values[j]) || entry.values[j] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": entry '", name,
                                                       "' value ", j, " is ", entry.values[j],
                                                       "; an importance is finite and >= 0"));
      }
    }
    if (!matrix.entries.emplace(name, std::move(entry)).second) {
      return in.Error(absl::StrCat("entry '", name, "' appears twice"));
    }
  }
  if (!in.AtEnd()) {
    ASSIGN_OR_RETURN(matrix.last_call, in.Int32("the chunk count"));
    ASSIGN_OR_RETURN(const int32_t len, in.Int32("the dataset name"));
    if (len < 0 || len > kMaxNameLength) {
      return in.Error(absl::StrCat("a dataset name of ", len, " bytes"));
    }
    matrix.dataset.resize(len);
    RETURN_IF_ERROR(in.Bytes(matrix.dataset.data(), len, "the dataset name"));
    if (!in.AtEnd()) return in.Error("trailing bytes after the dataset name");
  }
  return matrix;
}

absl::StatusOr<ImportanceMatrix> ReadImatrix(storage::Env* env, const std::string& path) {
  if (!env->FileExists(path)) {
    return absl::NotFoundError(
        absl::StrCat(path,
                     ": no such file; make one with `wasted imatrix MODEL TEXT -o FILE` (or "
                     "llama.cpp's llama-imatrix)"));
  }
  ASSIGN_OR_RETURN(const std::string bytes, storage::ReadFileToString(env, path));
  return DecodeImatrix(bytes, path);
}

absl::Status WriteImatrix(storage::Env* env, const std::string& path,
                          const ImportanceMatrix& matrix) {
  if (matrix.entries.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no importance data to write to ", path, " (llama.cpp's format needs at least one entry)"));
  }
  return storage::WriteFileAtomically(env, path, EncodeImatrix(matrix));
}

}  // namespace waste::quality
