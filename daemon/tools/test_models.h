// Test helpers: synthetic models from mkmodel (optionally with metadata
// keys added or replaced), loaded fully resident.
#ifndef WASTE_DAEMON_TOOLS_TEST_MODELS_H_
#define WASTE_DAEMON_TOOLS_TEST_MODELS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/cache/resident_store.h"
#include "daemon/model/model.h"
#include "daemon/tools/synthetic_model.h"
#include "storage/env.h"
#include "storage/gguf.h"

namespace waste::tools::testing {

using MetadataOverrides = std::vector<std::pair<std::string, storage::GgufValue>>;

// Writes options.out with mkmodel, then, if `overrides` is not empty,
// rewrites it with those keys replaced or appended (the tensors copied).
absl::Status WriteModel(const MkModelOptions& options, const MetadataOverrides& overrides);

// A model file opened, bound and read into a resident store.
struct LoadedModel {
  std::unique_ptr<storage::GgufFile> gguf;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<storage::RandomAccessFile> file;
  std::unique_ptr<cache::ResidentChunkStore> store;
};
absl::StatusOr<LoadedModel> LoadModel(const std::string& path);

}  // namespace waste::tools::testing

#endif  // WASTE_DAEMON_TOOLS_TEST_MODELS_H_
