// The models a daemon can serve: every *.gguf file under its models
// directories (searched recursively). The name of a model is its file stem.
//
// Thread-safe: Scan() only reads the filesystem and returns a fresh list.
#ifndef WASTE_DAEMON_ENGINE_MODEL_CATALOG_H_
#define WASTE_DAEMON_ENGINE_MODEL_CATALOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace waste {

struct ModelFile {
  // File stem, unique within a catalog; for a model split by gguf-split
  // (PREFIX-00001-of-0000N.gguf, ...) PREFIX's file name, path its first
  // part and size_bytes all its parts'.
  std::string name;
  std::string path;  // Absolute path.
  int64_t size_bytes = 0;
};

// Whether `name` can be a model name: not empty, no '/', no NUL, not "."
// or "..", so a name never reaches outside the models directories.
bool IsValidModelName(const std::string& name);

class ModelCatalog {
 public:
  // Files (and directories) under a models directory that are symlinks to
  // somewhere outside it are skipped (and logged) unless `follow_symlinks`.
  explicit ModelCatalog(std::vector<std::string> dirs, bool follow_symlinks = false)
      : dirs_(std::move(dirs)), follow_symlinks_(follow_symlinks) {}

  // Checks that every directory exists and can be listed; the error names
  // the directory and the reason (missing, not a directory, permission).
  absl::Status Validate() const;

  // Every model, sorted by name. When two files share a stem, the one in the
  // earlier directory (then the lexically first path) wins and the other is
  // logged once per scan as shadowed.
  std::vector<ModelFile> Scan() const;

  // The model called `name`, or NOT_FOUND listing where it looked;
  // INVALID_ARGUMENT for a name that is not one (IsValidModelName).
  absl::StatusOr<ModelFile> Find(const std::string& name) const;

  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  std::vector<std::string> dirs_;
  bool follow_symlinks_;
};

}  // namespace waste

#endif  // WASTE_DAEMON_ENGINE_MODEL_CATALOG_H_
