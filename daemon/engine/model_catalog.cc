#include "daemon/engine/model_catalog.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace waste {
namespace fs = std::filesystem;

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
    auto options = fs::directory_options::follow_directory_symlink |
                   fs::directory_options::skip_permission_denied;
    for (fs::recursive_directory_iterator it(dir, options, ec), end; !ec && it != end;
         it.increment(ec)) {
      const fs::directory_entry& entry = *it;
      std::error_code entry_ec;
      if (!entry.is_regular_file(entry_ec) || entry.path().extension() != ".gguf") continue;
      ModelFile model;
      model.name = entry.path().stem().string();
      model.path = fs::absolute(entry.path(), entry_ec).lexically_normal().string();
      model.size_bytes = static_cast<int64_t>(entry.file_size(entry_ec));
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
  for (ModelFile& model : Scan()) {
    if (model.name == name) return std::move(model);
  }
  return absl::NotFoundError(absl::StrCat(
      "no model named '", name, "' in ",
      dirs_.empty() ? "(no models directories configured)" : absl::StrJoin(dirs_, ", "),
      " (models are *.gguf files; the name is the file stem)"));
}

}  // namespace waste
