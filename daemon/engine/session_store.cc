#include "daemon/engine/session_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/engine/state_dir.h"

namespace waste::engine {
namespace {

constexpr char kMagic[8] = {'W', 'A', 'S', 'T', 'E', 'S', 'E', 'S'};
constexpr uint32_t kVersion = 1;

// FNV-1a over 8-byte words (bytes of a tail one at a time): fast enough for
// hundreds of MiB of KV cache, and catches torn or flipped data.
class Checksum {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h_ = (h_ ^ w) * 1099511628211ull;
    }
    for (; i < n; ++i) h_ = (h_ ^ p[i]) * 1099511628211ull;
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 14695981039346656037ull;
};

std::string ErrnoText() { return std::strerror(errno); }

// Writes all of `data` or fails, adding it to `sum`.
absl::Status WriteAll(int fd, const std::string& path, const void* data, size_t n, Checksum* sum) {
  if (sum != nullptr) sum->Add(data, n);
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return absl::InternalError(absl::StrCat("writing ", path, ": ", ErrnoText()));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, const std::string& path, void* data, size_t n, Checksum* sum) {
  auto* p = static_cast<uint8_t*>(data);
  size_t left = n;
  while (left > 0) {
    const ssize_t r = ::read(fd, p, left);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::UnavailableError(absl::StrCat("reading ", path, ": ", ErrnoText()));
    if (r == 0) return absl::DataLossError(absl::StrCat(path, " is truncated"));
    p += r;
    left -= static_cast<size_t>(r);
  }
  if (sum != nullptr) sum->Add(data, n);
  return absl::OkStatus();
}

// The rows of the sliding-window layers' rings (all of one size), or 0:
// their rows are saved as they sit, so the ring must be the same to restore.
int64_t RingRows(const model::SequenceState& state) {
  const model::KvCache& kv = state.kv();
  for (int64_t l = 0; l < kv.layers(); ++l) {
    if (kv.rows(l) < kv.n_ctx()) return kv.rows(l);
  }
  return 0;
}

// Positions 0 .. n - 1 of layer l: its first n rows, or its whole ring.
uint64_t LayerBytes(const model::KvCache& kv, int64_t l, int64_t n) {
  return static_cast<uint64_t>(std::min(n, kv.rows(l))) * kv.position_bytes();
}

// The header's fields: what must match for the KV bytes to mean anything.
std::map<std::string, std::string> HeaderFields(const cache::ModelFileIdentity& id,
                                                const model::SequenceState& state,
                                                const model::Model& model) {
  const model::KvCache& kv = state.kv();
  std::map<std::string, std::string> fields = {
      {"model_path", id.path},
      {"model_size", absl::StrCat(id.size)},
      {"model_mtime_ns", absl::StrCat(id.mtime_ns)},
      {"layout_hash", absl::StrCat(id.layout_hash)},
      {"chunks", absl::StrCat(id.chunk_count)},
      {"layers", absl::StrCat(model.hparams().n_layer)},
      {"kv_type", kv.type() == kernels::ops::KvType::kF32 ? "f32" : "f16"},
      {"kv_position_bytes", absl::StrCat(kv.position_bytes())},
      {"kv_shared", kv.shared_kv() ? "1" : "0"}};
  // Only where there are rings, so that files saved before them still match.
  if (const int64_t ring = RingRows(state); ring > 0) fields["kv_ring_rows"] = absl::StrCat(ring);
  return fields;
}

}  // namespace

bool IsValidSessionId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

SessionStore::SessionStore(std::string dir, cache::ModelFileIdentity identity,
                           const model::Model* model, uint64_t max_total_bytes)
    : dir_(std::move(dir)),
      identity_(std::move(identity)),
      model_(model),
      max_total_bytes_(max_total_bytes) {}

std::string SessionStore::DirFor(const std::string& state_dir, const std::string& model_path) {
  return absl::StrCat(state_dir, "/sessions/", cache::ModelPathKey(model_path));
}

std::string SessionStore::PathOf(const std::string& id) const {
  return absl::StrCat(dir_, "/", id, ".session");
}

bool SessionStore::Exists(const std::string& id) const {
  struct stat st;
  return IsValidSessionId(id) && ::stat(PathOf(id).c_str(), &st) == 0;
}

void SessionStore::Remove(const std::string& id) {
  if (IsValidSessionId(id)) ::unlink(PathOf(id).c_str());
}

absl::StatusOr<SavedSessionInfo> SessionStore::Save(const Session& session) {
  if (!IsValidSessionId(session.id)) {
    return absl::InvalidArgumentError(absl::StrCat("session id '", session.id, "' is not valid"));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", dir_, " for saved sessions: ", ec.message()));
  }
  const model::SequenceState& state = *session.state;
  const int64_t n = state.n_past();
  std::string header;
  for (const auto& [key, value] : HeaderFields(identity_, state, *model_)) {
    absl::StrAppend(&header, key, " ", value, "\n");
  }
  absl::StrAppend(&header, "id ", session.id, "\ntokens ", n, "\n");

  const std::string path = PathOf(session.id);
  const std::string tmp = TemporaryStatePath(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("creating ", tmp, ": ", ErrnoText()));
  Checksum sum;
  const uint32_t version = kVersion, header_len = static_cast<uint32_t>(header.size());
  absl::Status status = WriteAll(fd, tmp, kMagic, sizeof(kMagic), &sum);
  if (status.ok()) status = WriteAll(fd, tmp, &version, sizeof(version), &sum);
  if (status.ok()) status = WriteAll(fd, tmp, &header_len, sizeof(header_len), &sum);
  if (status.ok()) status = WriteAll(fd, tmp, header.data(), header.size(), &sum);
  if (status.ok()) {
    status = WriteAll(fd, tmp, session.tokens.data(), n * sizeof(int32_t), &sum);
  }
  const model::KvCache& kv = state.kv();
  for (int64_t l = 0; status.ok() && l < model_->hparams().n_layer; ++l) {
    const kernels::ops::KvCacheLayer layer = kv.Layer(l);
    const uint64_t layer_bytes = LayerBytes(kv, l, static_cast<int64_t>(n));
    status = WriteAll(fd, tmp, layer.k, layer_bytes, &sum);
    if (status.ok() && !kv.shared_kv()) status = WriteAll(fd, tmp, layer.v, layer_bytes, &sum);
  }
  const uint64_t checksum = sum.value();
  if (status.ok()) status = WriteAll(fd, tmp, &checksum, sizeof(checksum), nullptr);
  if (status.ok() && ::fsync(fd) != 0) {
    status = absl::InternalError(absl::StrCat("fsync ", tmp, ": ", ErrnoText()));
  }
  ::close(fd);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::InternalError(absl::StrCat("renaming ", tmp, ": ", ErrnoText()));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  if (const int dir = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);  // The rename itself survives a crash.
    ::close(dir);
  }
  SavedSessionInfo info;
  info.path = path;
  info.tokens = n;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) info.bytes = static_cast<uint64_t>(st.st_size);
  AfterSave(path, info.bytes);
  return info;
}

absl::StatusOr<std::vector<int32_t>> SessionStore::Load(const std::string& id,
                                                        model::SequenceState* state) {
  if (!IsValidSessionId(id)) {
    return absl::InvalidArgumentError(absl::StrCat("session id '", id, "' is not valid"));
  }
  const std::string path = PathOf(id);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no saved session ", id));
    return absl::UnavailableError(absl::StrCat("opening ", path, ": ", ErrnoText()));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  Checksum sum;
  char magic[sizeof(kMagic)];
  uint32_t version = 0, header_len = 0;
  RETURN_IF_ERROR(ReadAll(fd, path, magic, sizeof(magic), &sum));
  RETURN_IF_ERROR(ReadAll(fd, path, &version, sizeof(version), &sum));
  RETURN_IF_ERROR(ReadAll(fd, path, &header_len, sizeof(header_len), &sum));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0 || version != kVersion ||
      header_len > (1u << 20)) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a waste session file (v", kVersion, ")"));
  }
  std::string header(header_len, '\0');
  RETURN_IF_ERROR(ReadAll(fd, path, header.data(), header.size(), &sum));
  std::map<std::string, std::string> fields;
  for (absl::string_view line : absl::StrSplit(header, '\n', absl::SkipEmpty())) {
    const size_t space = line.find(' ');
    if (space == absl::string_view::npos) {
      return absl::DataLossError(absl::StrCat(path, ": bad header line '", line, "'"));
    }
    fields[std::string(line.substr(0, space))] = std::string(line.substr(space + 1));
  }
  std::map<std::string, std::string> wanted = HeaderFields(identity_, *state, *model_);
  wanted.try_emplace("kv_ring_rows", "");  // A file saved with rings needs them.
  for (const auto& [key, want] : wanted) {
    if (fields[key] != want) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " was saved for another model or cache (", key, " is ", fields[key],
                       ", this model has ", want, ")"));
    }
  }
  int64_t n = 0;
  if (fields["id"] != id || !absl::SimpleAtoi(fields["tokens"], &n) || n < 0) {
    return absl::DataLossError(absl::StrCat(path, ": bad id or token count"));
  }
  if (n >= state->n_ctx()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "saved session ", id, " holds ", n, " tokens, more than the context of ", state->n_ctx()));
  }
  std::vector<int32_t> tokens(n);
  RETURN_IF_ERROR(ReadAll(fd, path, tokens.data(), n * sizeof(int32_t), &sum));
  const model::KvCache& kv = state->kv();
  for (int64_t l = 0; l < model_->hparams().n_layer; ++l) {
    const kernels::ops::KvCacheLayer layer = kv.Layer(l);
    const uint64_t layer_bytes = LayerBytes(kv, l, n);
    RETURN_IF_ERROR(ReadAll(fd, path, layer.k, layer_bytes, &sum));
    if (!kv.shared_kv()) RETURN_IF_ERROR(ReadAll(fd, path, layer.v, layer_bytes, &sum));
  }
  uint64_t checksum = 0;
  RETURN_IF_ERROR(ReadAll(fd, path, &checksum, sizeof(checksum), nullptr));
  char extra;
  if (checksum != sum.value() || ::read(fd, &extra, 1) != 0) {
    return absl::DataLossError(absl::StrCat(path, " is corrupt (checksum mismatch)"));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= model_->hparams().n_vocab) {
      return absl::DataLossError(absl::StrCat(path, ": token id ", t, " outside the vocabulary"));
    }
  }
  state->RestorePast(n);
  ::utimes(path.c_str(), nullptr);  // Recently used: trimmed last.
  return tokens;
}

// Saves between two listings of the saved sessions at most.
constexpr int kSavesPerListing = 64;

void SessionStore::AfterSave(const std::string& keep, uint64_t bytes) {
  if (max_total_bytes_ == 0) return;
  if (total_estimate_) *total_estimate_ += bytes;
  if (!total_estimate_ || *total_estimate_ > max_total_bytes_ ||
      ++saves_since_listing_ >= kSavesPerListing) {
    Trim(keep);
  }
}

void SessionStore::Trim(const std::string& keep) {
  saves_since_listing_ = 0;
  const std::filesystem::path root = std::filesystem::path(dir_).parent_path();
  struct File {
    std::filesystem::path path;
    std::filesystem::file_time_type time;
    uint64_t bytes;
  };
  std::vector<File> files;
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != ".session") continue;
    const uint64_t bytes = it->file_size(ec);
    files.push_back({it->path(), it->last_write_time(ec), bytes});
    total += bytes;
  }
  total_estimate_ = total;
  if (total <= max_total_bytes_) return;
  std::sort(files.begin(), files.end(),
            [](const File& a, const File& b) { return a.time < b.time; });
  const uint64_t target = max_total_bytes_ / 10 * 9;
  for (const File& f : files) {
    if (total <= target) break;
    if (f.path == keep) continue;
    WLOG(INFO) << "removing saved session " << f.path.string()
               << ": saved sessions exceed max_saved_sessions_bytes (" << max_total_bytes_ << ")";
    std::filesystem::remove(f.path, ec);
    total -= f.bytes;
  }
  total_estimate_ = total;
}

}  // namespace waste::engine
