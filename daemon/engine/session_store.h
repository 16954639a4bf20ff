// Saved sessions: a session's tokens and the filled part of its KV cache,
// kept under the state directory so a conversation continues after the
// model unloads or the daemon restarts with only its new tokens computed.
//
// One file per session, <state_dir>/sessions/<model path hash>/<id>.session:
//   "WASTESES" v1, a text header (the model file's identity: path, size,
//   mtime and chunk layout; the KV cache's shape and type; the token
//   count), the tokens, then per layer the first n positions of K (and V
//   unless MLA shares them), and an FNV-1a checksum of everything before it.
// Written to a temporary file (state_dir.h), fsynced and renamed: a crash
// leaves the old file or the new one, never half of one. A file whose identity or shape
// does not match the loaded model, or whose checksum fails, is refused
// (FAILED_PRECONDITION / DATA_LOSS) and logged; the request then starts a
// fresh session. The directory is bounded: when a save may take the total
// over the limit, the least recently written files go until it is under
// 90 % of it (so the next saves need not list the directory again).
//
// Thread-safety: a SessionStore is used by its model's scheduler thread.
#ifndef WASTE_DAEMON_ENGINE_SESSION_STORE_H_
#define WASTE_DAEMON_ENGINE_SESSION_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/cache/hotlist.h"
#include "daemon/engine/sessions.h"
#include "daemon/model/model.h"

namespace waste::engine {

// Session ids the daemon hands out and accepts: letters, digits, '-' and
// '_', 1..64 of them (so an id is always a safe file name).
bool IsValidSessionId(const std::string& id);

struct SavedSessionInfo {
  std::string path;
  uint64_t bytes = 0;
  int64_t tokens = 0;
};

class SessionStore {
 public:
  // `dir` is the model's directory under <state_dir>/sessions; created on
  // the first save. `max_total_bytes` bounds every model's saved sessions
  // together (the parent directory), 0: no bound.
  SessionStore(std::string dir, cache::ModelFileIdentity identity, const model::Model* model,
               uint64_t max_total_bytes);

  static std::string DirFor(const std::string& state_dir, const std::string& model_path);

  // Writes the session (its id, tokens and KV positions 0..n_past-1).
  absl::StatusOr<SavedSessionInfo> Save(const Session& session);

  // Restores session `id` into `state` (whose context must hold it) and
  // returns its tokens. NOT_FOUND when there is no file; the errors above
  // when it cannot be used.
  absl::StatusOr<std::vector<int32_t>> Load(const std::string& id, model::SequenceState* state);

  bool Exists(const std::string& id) const;
  void Remove(const std::string& id);

 private:
  std::string PathOf(const std::string& id) const;
  // After a save of `bytes` at `keep`: when the directory may be over its
  // limit, lists it and removes the least recently written files (never
  // `keep`) until it is under.
  void AfterSave(const std::string& keep, uint64_t bytes);
  void Trim(const std::string& keep);

  std::string dir_;
  cache::ModelFileIdentity identity_;
  const model::Model* model_;
  uint64_t max_total_bytes_;
  // The saved sessions' bytes as of the last listing plus this store's
  // saves since (other models' stores save into the same limit: a listing
  // every kSavesPerListing saves catches those). Listing the directory at
  // every save made each save cost O(saved sessions) in time and
  // temporary memory.
  std::optional<uint64_t> total_estimate_;
  int saves_since_listing_ = 0;
};

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_SESSION_STORE_H_
