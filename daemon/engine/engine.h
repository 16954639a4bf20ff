// The engine: the models a daemon serves and the ones it has loaded. Models
// load on first use (or by LoadModel) with the daemon's configuration for
// them, and stay loaded until unloaded.
//
// Thread-safe. Loading one model does not block requests to others.
#ifndef WASTE_DAEMON_ENGINE_ENGINE_H_
#define WASTE_DAEMON_ENGINE_ENGINE_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/engine/loaded_model.h"
#include "daemon/engine/model_catalog.h"
#include "storage/env.h"
#include "waste/v1/config.pb.h"
#include "waste/v1/models.pb.h"

namespace waste::engine {

class Engine {
 public:
  // `env` and `catalog` must outlive the engine.
  Engine(storage::Env* env, const ModelCatalog* catalog, v1::DaemonConfig config);
  ~Engine();

  // Unloads models idle for longer than their keep_alive_seconds (0: as
  // soon as no request runs; -1 or unset: never). A background thread calls
  // it every second; tests call it directly.
  void UnloadIdle(absl::Time now);

  // The model called `name`, loading it if needed (or again, when its file
  // was replaced, truncated or rewritten since: LoadedModel::FileChanged;
  // requests running on the old copy finish on it). An empty name means the
  // configured default model, else the only loaded model, else the only
  // model in the catalog; otherwise INVALID_ARGUMENT listing the choices.
  absl::StatusOr<std::shared_ptr<LoadedModel>> Get(const std::string& name);

  // The model called `name` if it is loaded now, else null. Never blocks on
  // a load or reads a file (the empty name resolves only to the default
  // model or the only loaded one), so gRPC threads may call it. Null too
  // when the model's file changed (one stat(2)): Get reloads it.
  std::shared_ptr<LoadedModel> TryGetLoaded(const std::string& name);

  // Loads (or reloads, when `overrides` differ) the model with the daemon's
  // config for it overlaid by `overrides`.
  absl::StatusOr<std::shared_ptr<LoadedModel>> Load(const std::string& name,
                                                    const v1::ModelConfig& overrides);

  // Forgets a loaded model; requests running or queued on it finish first
  // (the call waits for them), or with `force` end at once with CANCELLED;
  // then its memory is freed. NOT_FOUND if not loaded.
  absl::Status Unload(const std::string& name, bool force = false);

  // The memory plan of a model (loaded or not) for a budget and context;
  // unset fields come from the model's config. A budget under the floor is
  // not an error here: the plan says fits = false and why.
  absl::StatusOr<v1::MemoryPlan> Plan(const v1::PlanRequest& request);

  // What ListModels says of a model file: architecture, parameters, main
  // weight type, trained context, and why it cannot be served (if so), read
  // from its GGUF header (cached by path, size and modification time).
  void Describe(const ModelFile& file, v1::ModelInfo* info);

  // The loaded models, by name.
  std::vector<std::shared_ptr<LoadedModel>> Loaded() const;

  // The configuration a model gets: defaults overlaid by its own section.
  v1::ModelConfig ConfigFor(const std::string& name) const;

  const ModelCatalog& catalog() const { return *catalog_; }

  // The daemon configuration in force, and a new one (SIGHUP): model
  // defaults, per-model sections, default_model and max_saved_sessions_bytes
  // apply to models loaded from then on; loaded models keep theirs.
  v1::DaemonConfig config() const;
  void Reconfigure(const v1::DaemonConfig& config);

 private:
  struct Slot {
    absl::Mutex mu;  // Held while loading.
    std::shared_ptr<LoadedModel> model ABSL_GUARDED_BY(mu);
  };

  // Retires the slot's model (its kept sessions go to disk) and lets go of
  // it; requests running on it finish there.
  static void Drop(Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slot.mu);

  absl::StatusOr<std::string> ResolveName(const std::string& name) const;
  std::shared_ptr<Slot> SlotFor(const std::string& name);

  void ReapLoop();

  storage::Env* env_;
  const ModelCatalog* catalog_;
  mutable absl::Mutex config_mu_;
  v1::DaemonConfig config_ ABSL_GUARDED_BY(config_mu_);
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  struct Described {
    int64_t size = 0;
    int64_t mtime_ns = 0;
    v1::ModelInfo info;
  };
  absl::Mutex reaper_mu_;
  bool stopping_ ABSL_GUARDED_BY(reaper_mu_) = false;
  std::thread reaper_;
  absl::Mutex describe_mu_;
  std::map<std::string, Described> described_ ABSL_GUARDED_BY(describe_mu_);
};

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_ENGINE_H_
