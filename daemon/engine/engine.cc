#include "daemon/engine/engine.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/process_memory.h"
#include "common/status_macros.h"
#include "daemon/engine/state_dir.h"
#include "daemon/model/layout.h"

namespace waste::engine {

Engine::Engine(storage::Env* env, const ModelCatalog* catalog, v1::DaemonConfig config)
    : env_(env), catalog_(catalog), config_(std::move(config)) {
  // Before any model loads: what a killed daemon was writing goes.
  RemoveStaleTemporaryFiles(this->config().state_dir());
  reaper_ = std::thread([this] { ReapLoop(); });
}

v1::DaemonConfig Engine::config() const {
  absl::MutexLock lock(&config_mu_);
  return config_;
}

void Engine::Reconfigure(const v1::DaemonConfig& config) {
  absl::MutexLock lock(&config_mu_);
  config_ = config;
}

Engine::~Engine() {
  {
    absl::MutexLock lock(&reaper_mu_);
    stopping_ = true;
  }
  reaper_.join();
}

void Engine::ReapLoop() {
  absl::MutexLock lock(&reaper_mu_);
  for (int tick = 1; !stopping_; ++tick) {
    reaper_mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(1));
    if (stopping_) break;
    reaper_mu_.Unlock();
    UnloadIdle(absl::Now());
    // Freed models, KV caches and call buffers go back to the system, so
    // RSS follows what is in use (common/process_memory.h).
    if (tick % 2 == 0) ReleaseFreeHeapMemory();
    reaper_mu_.Lock();
  }
}

void Engine::UnloadIdle(absl::Time now) {
  for (const std::shared_ptr<LoadedModel>& model : Loaded()) {
    const v1::ModelConfig& config = model->config();
    if (!config.has_keep_alive_seconds() || config.keep_alive_seconds() < 0) continue;
    if (model->active_requests() > 0) continue;
    if (now - model->last_used() < absl::Seconds(config.keep_alive_seconds())) continue;
    WLOG(INFO) << "unloading " << model->name() << ": idle for more than "
               << config.keep_alive_seconds() << " s (keep_alive)";
    absl::Status status = Unload(model->name());
    if (!status.ok()) WLOG(WARNING) << status.message();
  }
}

v1::ModelConfig Engine::ConfigFor(const std::string& name) const {
  const v1::DaemonConfig daemon = this->config();
  v1::ModelConfig config = daemon.model_defaults();
  if (!config.has_max_concurrent_requests() && daemon.has_max_concurrent_requests()) {
    config.set_max_concurrent_requests(daemon.max_concurrent_requests());
  }
  if (!config.has_max_queued_requests() && daemon.has_max_queued_requests()) {
    config.set_max_queued_requests(daemon.max_queued_requests());
  }
  auto it = daemon.models().find(name);
  if (it != daemon.models().end()) config.MergeFrom(it->second);
  return config;
}

absl::StatusOr<std::string> Engine::ResolveName(const std::string& name) const {
  if (!name.empty()) return name;
  const std::string default_model = config().default_model();
  if (!default_model.empty()) return default_model;
  std::vector<std::string> loaded;
  for (const auto& model : Loaded()) loaded.push_back(model->name());
  if (loaded.size() == 1) return loaded[0];
  std::vector<ModelFile> files = catalog_->Scan();
  if (files.size() == 1) return files[0].name;
  std::vector<std::string> names;
  for (const ModelFile& file : files) names.push_back(file.name);
  return absl::InvalidArgumentError(
      absl::StrCat("model: name a model (the daemon has ",
                   names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
}

std::shared_ptr<Engine::Slot> Engine::SlotFor(const std::string& name) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Slot>& slot = slots_[name];
  if (slot == nullptr) slot = std::make_shared<Slot>();
  return slot;
}

absl::StatusOr<std::shared_ptr<LoadedModel>> Engine::Get(const std::string& requested) {
  ASSIGN_OR_RETURN(std::string name, ResolveName(requested));
  std::shared_ptr<Slot> slot = SlotFor(name);
  absl::MutexLock lock(&slot->mu);
  if (slot->model != nullptr) {
    std::string how;
    if (!slot->model->FileChanged(&how)) return slot->model;
    // Requests running on the old copy finish on it (they hold it).
    WLOG(WARNING) << how << "; reloading it";
    Drop(*slot);
  }
  ASSIGN_OR_RETURN(ModelFile file, catalog_->Find(name));
  ASSIGN_OR_RETURN(
      std::unique_ptr<LoadedModel> loaded,
      LoadedModel::Load(env_, file.name, file.path, ConfigFor(name), config().state_dir(),
                        static_cast<uint64_t>(config().max_saved_sessions_bytes())));
  slot->model = std::move(loaded);
  return slot->model;
}

void Engine::Drop(Slot& slot) {
  if (slot.model == nullptr) return;
  slot.model->Retire();
  slot.model.reset();
}

std::shared_ptr<LoadedModel> Engine::TryGetLoaded(const std::string& requested) {
  std::string name = requested;
  if (name.empty()) name = config().default_model();
  if (name.empty()) {
    std::vector<std::shared_ptr<LoadedModel>> loaded = Loaded();
    // A changed model file: the slow path (Get) reloads it.
    return loaded.size() == 1 && !loaded[0]->FileChanged() ? loaded[0] : nullptr;
  }
  std::shared_ptr<Slot> slot;
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(name);
    if (it == slots_.end()) return nullptr;
    slot = it->second;
  }
  if (!slot->mu.TryLock()) return nullptr;  // Loading: the slow path waits.
  std::shared_ptr<LoadedModel> model = slot->model;
  slot->mu.Unlock();
  if (model != nullptr && model->FileChanged()) return nullptr;  // Get reloads it.
  return model;
}

absl::StatusOr<std::shared_ptr<LoadedModel>> Engine::Load(const std::string& requested,
                                                          const v1::ModelConfig& overrides) {
  ASSIGN_OR_RETURN(std::string name, ResolveName(requested));
  ASSIGN_OR_RETURN(ModelFile file, catalog_->Find(name));
  v1::ModelConfig config = ConfigFor(name);
  config.MergeFrom(overrides);
  std::shared_ptr<Slot> slot = SlotFor(name);
  absl::MutexLock lock(&slot->mu);
  std::string how;
  if (slot->model != nullptr &&
      slot->model->config().SerializeAsString() == config.SerializeAsString() &&
      !slot->model->FileChanged(&how)) {
    return slot->model;
  }
  if (!how.empty()) WLOG(WARNING) << how << "; reloading it";
  // Free the old copy first so both never hold their budget at once.
  Drop(*slot);
  ASSIGN_OR_RETURN(
      std::unique_ptr<LoadedModel> loaded,
      LoadedModel::Load(env_, file.name, file.path, config, this->config().state_dir(),
                        static_cast<uint64_t>(this->config().max_saved_sessions_bytes())));
  slot->model = std::move(loaded);
  return slot->model;
}

absl::Status Engine::Unload(const std::string& name, bool force) {
  std::shared_ptr<Slot> slot;
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(name);
    if (it != slots_.end()) slot = it->second;
  }
  std::shared_ptr<LoadedModel> model;
  if (slot != nullptr) {
    absl::MutexLock lock(&slot->mu);
    model = std::move(slot->model);
    // Under the lock: a request that loads the model again finds the
    // sessions this copy kept on disk.
    if (model != nullptr) model->Retire();
  }
  if (model != nullptr) {
    if (force) model->CancelAll(absl::StrCat("model ", name, " was unloaded (forced)"));
    // Outside the slot's lock: the last reference lets the model's running
    // and queued requests finish before it frees its memory, and a request
    // arriving meanwhile may load it afresh.
    model.reset();
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded"));
}

absl::StatusOr<v1::MemoryPlan> Engine::Plan(const v1::PlanRequest& request) {
  ASSIGN_OR_RETURN(std::string name, ResolveName(request.model()));
  ASSIGN_OR_RETURN(ModelFile file, catalog_->Find(name));
  ASSIGN_OR_RETURN(std::unique_ptr<storage::GgufFile> gguf,
                   storage::GgufFile::Open(env_, file.path));
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> model, model::Model::Create(*gguf));
  v1::ModelConfig config = ConfigFor(name);
  if (request.has_ram_budget_bytes()) config.set_ram_budget_bytes(request.ram_budget_bytes());
  if (request.has_vram_budget_bytes()) config.set_vram_budget_bytes(request.vram_budget_bytes());
  if (request.has_context_length()) config.set_context_length(request.context_length());
  if (request.has_max_concurrent_requests()) {
    config.set_max_concurrent_requests(request.max_concurrent_requests());
  }
  int64_t n_ctx = ContextLengthFor(model->hparams(), config);
  absl::StatusOr<ModelPlan> planned = PlanModel(*model, config, n_ctx);
  if (planned.ok()) return ToProto(*model, *planned);
  if (planned.status().code() != absl::StatusCode::kResourceExhausted) return planned.status();
  // Under the floor: report the sizes and why it does not fit.
  ModelPlan at_floor;
  v1::ModelConfig floor_config = config;
  floor_config.clear_ram_budget_bytes();
  ASSIGN_OR_RETURN(at_floor, PlanModel(*model, floor_config, n_ctx));
  v1::MemoryPlan out = ToProto(*model, at_floor);
  out.set_ram_budget_bytes(config.ram_budget_bytes());
  out.set_fits(false);
  out.set_explanation(std::string(planned.status().message()));
  return out;
}

void Engine::Describe(const ModelFile& file, v1::ModelInfo* info) {
  struct stat st;
  int64_t mtime_ns = 0;
  if (stat(file.path.c_str(), &st) == 0) {
    mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  {
    absl::MutexLock lock(&describe_mu_);
    auto it = described_.find(file.path);
    if (it != described_.end() && it->second.size == file.size_bytes &&
        it->second.mtime_ns == mtime_ns) {
      info->MergeFrom(it->second.info);
      return;
    }
  }
  v1::ModelInfo described;
  absl::StatusOr<std::unique_ptr<storage::GgufFile>> gguf =
      storage::GgufFile::Open(env_, file.path);
  if (!gguf.ok()) {
    described.set_unusable_reason(std::string(gguf.status().message()));
  } else {
    described.set_architecture((*gguf)->GetString("general.architecture").value_or(""));
    if (absl::StatusOr<model::ModelLayout> layout = model::ModelLayout::FromGguf(**gguf);
        layout.ok()) {
      described.set_parameters(layout->total_params());
      uint64_t most = 0;
      for (const auto& [type, bytes] : layout->types()) {
        if (bytes.bytes > most) {
          most = bytes.bytes;
          described.set_quantization(std::string(storage::GgmlTypeName(type)));
        }
      }
    }
    described.set_context_length(static_cast<int32_t>(
        (*gguf)->GetInt(described.architecture() + ".context_length").value_or(0)));
    if (absl::StatusOr<std::unique_ptr<model::Model>> bound = model::Model::Create(**gguf);
        !bound.ok()) {
      described.set_unusable_reason(std::string(bound.status().message()));
    }
  }
  info->MergeFrom(described);
  absl::MutexLock lock(&describe_mu_);
  described_[file.path] = {file.size_bytes, mtime_ns, std::move(described)};
}

std::vector<std::shared_ptr<LoadedModel>> Engine::Loaded() const {
  std::vector<std::shared_ptr<Slot>> slots;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, slot] : slots_) slots.push_back(slot);
  }
  std::vector<std::shared_ptr<LoadedModel>> loaded;
  for (const auto& slot : slots) {
    // A slot that is loading is skipped rather than waited for.
    if (!slot->mu.TryLock()) continue;
    if (slot->model != nullptr) loaded.push_back(slot->model);
    slot->mu.Unlock();
  }
  return loaded;
}

}  // namespace waste::engine
