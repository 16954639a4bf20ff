// The warm hotlist: how often each routed expert of a model was used,
// persisted across daemon restarts so a restarted daemon preloads the
// hottest experts into its expert cache instead of starting cold.
//
// File (text, one per model, written atomically with a temporary file and a
// rename): a header naming the format and version, the model file's
// identity (path, size, mtime, and a fingerprint of its chunk layout:
// names, offsets and lengths, i.e. the GGUF's tensor table), the number of
// entries and an FNV-1a checksum of the entry lines, then one line per
// expert chunk "ID USES NAME", hottest first. A hotlist whose identity does
// not match the model (the file was replaced, re-quantized, moved) or whose
// checksum or syntax is wrong is refused with FAILED_PRECONDITION or
// DATA_LOSS; WarmExpertCache logs a warning and starts cold.
//
// Thread-safety: free functions; the store must be used from its engine
// thread as usual.
#ifndef WASTE_DAEMON_CACHE_HOTLIST_H_
#define WASTE_DAEMON_CACHE_HOTLIST_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/cache/streaming_store.h"
#include "storage/env.h"

namespace waste::cache {

struct ModelFileIdentity {
  std::string path;
  uint64_t size = 0;
  int64_t mtime_ns = 0;      // 0 when the file is not on a real file system.
  uint64_t layout_hash = 0;  // Of the chunk specs.
  uint64_t chunk_count = 0;
  bool operator==(const ModelFileIdentity&) const = default;
};

// The identity of the model at `path` (size from `env`, mtime from stat(2)
// when there is such a file) with the layout of `chunks`.
absl::StatusOr<ModelFileIdentity> IdentifyModelFile(storage::Env* env, const std::string& path,
                                                    std::span<const ChunkSpec> chunks);

struct HotlistEntry {
  ChunkId chunk = 0;
  uint64_t uses = 0;
};

// A short name for a model path in file names of the state directory (16
// hex digits of its hash).
std::string ModelPathKey(const std::string& model_path);

// Where a model's hotlist lives under a state directory: one file per model
// path ("hotlist-<ModelPathKey>.txt").
std::string HotlistPathFor(const std::string& state_dir, const std::string& model_path);

// Writes the expert chunks with uses > 0 (uses by ChunkId, e.g. the store's
// acquire_counts(), plus `previous` counts carried over, halved, so a
// hotlist remembers earlier runs but follows the latest) to `hotlist_path`.
absl::Status SaveHotlist(storage::Env* env, const std::string& hotlist_path,
                         const ModelFileIdentity& identity, std::span<const ChunkSpec> chunks,
                         std::span<const uint32_t> uses,
                         std::span<const HotlistEntry> previous = {});

// The entries, hottest first. NOT_FOUND when there is no file,
// FAILED_PRECONDITION when it belongs to another model (or another version
// of this one), DATA_LOSS when it is corrupt.
absl::StatusOr<std::vector<HotlistEntry>> LoadHotlist(storage::Env* env,
                                                      const std::string& hotlist_path,
                                                      const ModelFileIdentity& identity,
                                                      std::span<const ChunkSpec> chunks);

// Loads the hotlist and preloads its hottest experts into `store` (as many
// as its free slots hold), seeding the policy with their (scaled) counts. A
// missing hotlist is a cold start; a mismatched or corrupt one is logged as
// a warning and ignored. Returns the entries read (for the next
// SaveHotlist's `previous`) and sets *preloaded. Only a read error of the
// model file is returned as an error.
absl::StatusOr<std::vector<HotlistEntry>> WarmExpertCache(
    storage::Env* env, const std::string& hotlist_path, const ModelFileIdentity& identity,
    std::span<const ChunkSpec> chunks, StreamingChunkStore* store, int* preloaded);

}  // namespace waste::cache

#endif  // WASTE_DAEMON_CACHE_HOTLIST_H_
