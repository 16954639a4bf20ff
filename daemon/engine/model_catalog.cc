#include "daemon/engine/model_catalog.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "storage/split_gguf.h"

namespace waste {
namespace fs = std::filesystem;

namespace {

// Whether `path` resolves to somewhere inside `root` (both canonical).
bool Inside(const fs::path& path, const fs::path& root) {
  auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return r == root.end();
}

// Logs a skipped outside link once per process, not on every scan.
void WarnOutside(const std::string& link, const std::string& target) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* warned = new absl::flat_hash_set<std::string>();
  absl::MutexLock lock(&mu);
  if (warned->insert(link).second) {
    WLOG(WARNING) << "skipping " << link << ": it links to " << target
                  << ", outside its models directory (set follow_symlinks = true or "
                     "--follow-symlinks to serve it)";
  }
}

}  // namespace

bool IsValidModelName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

absl::Status ModelCatalog::Validate() const {
  for (const std::string& dir : dirs_) {
    std::error_code ec;
    fs::file_status status = fs::status(dir, ec);
    if (ec || !fs::exists(status)) {
      return absl::NotFoundError(absl::StrCat("models directory ", dir, " does not exist"));
    }
    if (!fs::is_directory(status)) {
      return absl::FailedPreconditionError(
          absl::StrCat("models directory ", dir, " is not a directory"));
    }
    if (access(dir.c_str(), R_OK | X_OK) != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("models directory ", dir, " cannot be read: permission denied"));
    }
  }
  return absl::OkStatus();
}

std::vector<ModelFile> ModelCatalog::Scan() const {
  std::vector<ModelFile> models;
  absl::flat_hash_map<std::string, size_t> by_name;
  for (const std::string& dir : dirs_) {
    std::error_code ec;
    std::vector<ModelFile> found;
    auto options = fs::directory_options::skip_permission_denied;
    if (follow_symlinks_) options |= fs::directory_options::follow_directory_symlink;
    const fs::path root = fs::weakly_canonical(dir, ec);
    for (fs::recursive_directory_iterator it(dir, options, ec), end; !ec && it != end;
         it.increment(ec)) {
      const fs::directory_entry& entry = *it;
      std::error_code entry_ec;
      if (!entry.is_regular_file(entry_ec) || entry.path().extension() != ".gguf") continue;
      if (!follow_symlinks_) {
        const fs::path target = fs::weakly_canonical(entry.path(), entry_ec);
        if (entry_ec || !Inside(target, root)) {
          WarnOutside(entry.path().string(), target.string());
          continue;
        }
      }
      ModelFile model;
      model.name = entry.path().stem().string();
      model.path = fs::absolute(entry.path(), entry_ec).lexically_normal().string();
      model.size_bytes = static_cast<int64_t>(entry.file_size(entry_ec));
      // A model split by gguf-split is its first part, named without the
      // part suffix, with all its parts' bytes; the other parts are not
      // models of their own.
      if (auto split = storage::ParseSplitName(entry.path().filename().string())) {
        if (split->index != 0) continue;
        model.name = split->prefix;
        for (int i = 1; i < split->count && !entry_ec; ++i) {
          const auto part = storage::SplitPartPath(entry.path().string(), i, split->count);
          std::error_code part_ec;
          const uintmax_t bytes = part.ok() ? fs::file_size(*part, part_ec) : 0;
          if (!part_ec) model.size_bytes += static_cast<int64_t>(bytes);
        }
      }
      if (!entry_ec) found.push_back(std::move(model));
    }
    if (ec) WLOG(WARNING) << "while scanning models directory " << dir << ": " << ec.message();
    std::sort(found.begin(), found.end(),
              [](const ModelFile& a, const ModelFile& b) { return a.path < b.path; });
    for (ModelFile& model : found) {
      auto [it, inserted] = by_name.emplace(model.name, models.size());
      if (!inserted) {
        WLOG(WARNING) << "model " << model.path << " is shadowed by " << models[it->second].path
                      << " (same name '" << model.name << "')";
        continue;
      }
      models.push_back(std::move(model));
    }
  }
  std::sort(models.begin(), models.end(),
            [](const ModelFile& a, const ModelFile& b) { return a.name < b.name; });
  return models;
}

absl::StatusOr<ModelFile> ModelCatalog::Find(const std::string& name) const {
  if (!IsValidModelName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: '", absl::CEscape(name),
                     "' is not a model name (names are file stems: no '/', '..' or NUL)"));
  }
  for (ModelFile& model : Scan()) {
    if (model.name == name) return std::move(model);
  }
  return absl::NotFoundError(absl::StrCat(
      "no model named '", name, "' in ",
      dirs_.empty() ? "(no models directories configured)" : absl::StrJoin(dirs_, ", "),
      " (models are *.gguf files; the name is the file stem, a split model's without "
      "-00001-of-0000N)"));
}

}  // namespace waste
