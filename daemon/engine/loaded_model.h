// A model loaded for serving: its GGUF index, the bound architecture, the
// tokenizer, the weight store (resident, or streamed under a RAM budget),
// the compute thread pool, and the scheduler whose step loop runs every
// generation on it in one batch (scheduler.h). Engine code only: no gRPC.
//
// Thread-safety: every method may be called from any thread. Destroying it
// lets running and queued generations finish first.
#ifndef WASTE_DAEMON_ENGINE_LOADED_MODEL_H_
#define WASTE_DAEMON_ENGINE_LOADED_MODEL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/cache/hotlist.h"
#include "daemon/cache/streaming_store.h"
#include "daemon/engine/generation.h"
#include "daemon/engine/planning.h"
#include "daemon/engine/scheduler.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/model/device_weights.h"
#include "daemon/model/model.h"
#include "daemon/text/tokenizer.h"
#include "storage/env.h"
#include "storage/gguf.h"
#include "waste/v1/config.pb.h"
#include "waste/v1/generate.pb.h"
#include "waste/v1/models.pb.h"
#include "waste/v1/stats.pb.h"

namespace waste::engine {

// Receives the events of one generation in order; returning false cancels it.
using EventSink = std::function<bool(const v1::GenerateEvent&)>;

class LoadedModel {
 public:
  // Opens `path`, binds the architecture and tokenizer and reads the
  // weights as `config` asks. Errors name the file and what is wrong.
  // `state_dir` (may be empty) is where the warm expert hotlist of a MoE
  // model is kept across restarts.
  // Sessions that asked to be kept are saved under `state_dir` too, within
  // `max_saved_sessions_bytes` for all models (0: unbounded).
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Load(
      storage::Env* env, const std::string& name, const std::string& path,
      const v1::ModelConfig& config, const std::string& state_dir = "",
      uint64_t max_saved_sessions_bytes = uint64_t{4} << 30);
  ~LoadedModel();

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const model::Model& model() const { return *model_; }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  const v1::ModelConfig& config() const { return config_; }
  int64_t context_length() const { return context_length_; }

  // Queues a generation on the model's scheduler; its events go to `sink`
  // (see Scheduler::Submit: on error the sink is not finished).
  absl::Status Submit(const v1::GenerateRequest& request, GenerationSink* sink,
                      absl::Time deadline = absl::InfiniteFuture());

  // Runs one generation and waits for it, sending events to `sink` (on the
  // scheduler's thread): started, tokens (and stats), done. Returns the
  // error that ended it, if any (no done event is sent then). `cancelled`
  // may be set from another thread at any time.
  absl::Status Generate(const v1::GenerateRequest& request, const EventSink& sink,
                        const std::atomic<bool>* cancelled);

  // Cancels every running and queued generation (a forced unload).
  void CancelAll(const std::string& reason) { scheduler_->CancelAll(reason); }

  // The engine drops this copy of the model: its kept sessions go to disk
  // for the next copy (see Scheduler::Retire).
  void Retire() { scheduler_->Retire(); }

  // Saves an open session to the state directory (see Scheduler).
  absl::StatusOr<SavedSessionInfo> SaveSession(const std::string& session_id) {
    return scheduler_->SaveSession(session_id);
  }

  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request) const;
  absl::StatusOr<v1::DetokenizeResponse> Detokenize(const v1::DetokenizeRequest& request) const;

  // When the last generation ended (or the model loaded), and how many are
  // running or waiting now: the engine unloads idle models after their
  // keep-alive.
  absl::Time last_used() const;
  int active_requests() const;
  SchedulerStats SchedulerCounters() const { return scheduler_->Stats(); }

  // True when the file at path() is no longer the one loaded: another file
  // (replaced), or another size or modification time (truncated or
  // rewritten in place). `how` (may be null) says what changed. A path that
  // is gone counts as unchanged: the open file keeps serving. One stat(2).
  bool FileChanged(std::string* how = nullptr) const;

  // The memory plan the model was loaded with.
  v1::MemoryPlan Plan() const;

  // Counters since load.
  v1::ModelStats Stats() const;
  // Describes the model for ListModels / LoadModel.
  void FillInfo(v1::ModelInfo* info) const;

 private:
  LoadedModel() = default;

  // What the model file was when loaded, for FileChanged.
  struct FileStamp {
    uint64_t device = 0;
    uint64_t inode = 0;
    int64_t size = -1;
    int64_t mtime_ns = 0;
  };
  static FileStamp StampOf(const std::string& path);

  std::string name_;
  std::string path_;
  FileStamp stamp_;
  v1::ModelConfig config_;
  int64_t context_length_ = 0;
  std::unique_ptr<storage::GgufFile> gguf_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<storage::RandomAccessFile> file_;
  std::unique_ptr<cache::StreamingChunkStore> store_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  ModelPlan plan_;
  // The VRAM tier when the plan has one and a GPU is there; the weights
  // go before the device.
  std::unique_ptr<gpu::Device> device_;
  std::unique_ptr<model::DeviceWeights> device_weights_;

  // The warm hotlist of a MoE model's experts (empty path: not kept).
  // Called on the scheduler thread when the batch empties, and at unload.
  void SaveHotlist();
  storage::Env* env_ = nullptr;
  std::string hotlist_path_;
  cache::ModelFileIdentity identity_;
  std::vector<cache::HotlistEntry> hotlist_previous_;

  std::unique_ptr<SessionStore> session_store_;
  ModelText text_;
  absl::Time loaded_at_ = absl::Now();
  // Last member: destroyed first, so its loop has finished before the
  // store, pool and model go.
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_LOADED_MODEL_H_
