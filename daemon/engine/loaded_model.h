// A model loaded for serving: its GGUF index, the bound architecture, the
// tokenizer, the weight store (resident, or streamed under a RAM budget),
// the compute thread pool and the open sessions. Engine code only: no gRPC.
//
// Thread-safety: Generate/Tokenize/Detokenize may be called from any thread;
// generations on one model run one at a time (the forward pass owns the
// thread pool and the store), in arrival order.
#ifndef WASTE_DAEMON_ENGINE_LOADED_MODEL_H_
#define WASTE_DAEMON_ENGINE_LOADED_MODEL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/cache/hotlist.h"
#include "daemon/cache/streaming_store.h"
#include "daemon/engine/planning.h"
#include "daemon/engine/sessions.h"
#include "daemon/kernels/thread_pool.h"
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
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Load(storage::Env* env,
                                                           const std::string& name,
                                                           const std::string& path,
                                                           const v1::ModelConfig& config,
                                                           const std::string& state_dir = "");
  ~LoadedModel();

  const std::string& name() const { return name_; }
  const model::Model& model() const { return *model_; }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  const v1::ModelConfig& config() const { return config_; }
  int64_t context_length() const { return context_length_; }

  // Runs one generation, sending events to `sink`: started, tokens (and
  // stats), done. Returns the error that ended it, if any (no done event is
  // sent then). `cancelled` may be set from another thread at any time.
  absl::Status Generate(const v1::GenerateRequest& request, const EventSink& sink,
                        const std::atomic<bool>* cancelled);

  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request) const;
  absl::StatusOr<v1::DetokenizeResponse> Detokenize(const v1::DetokenizeRequest& request) const;

  // When the last generation ended (or the model loaded), and how many are
  // running or waiting now: the engine unloads idle models after their
  // keep-alive.
  absl::Time last_used() const;
  int active_requests() const { return active_.load(); }

  // The memory plan the model was loaded with.
  v1::MemoryPlan Plan() const;

  // Counters since load.
  v1::ModelStats Stats() const;
  // Describes the model for ListModels / LoadModel.
  void FillInfo(v1::ModelInfo* info) const;

 private:
  LoadedModel() = default;

  std::string name_;
  std::string path_;
  v1::ModelConfig config_;
  int64_t context_length_ = 0;
  std::unique_ptr<storage::GgufFile> gguf_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<storage::RandomAccessFile> file_;
  std::unique_ptr<cache::StreamingChunkStore> store_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  ModelPlan plan_;

  // The warm hotlist of a MoE model's experts (empty path: not kept).
  void SaveHotlist() ABSL_EXCLUSIVE_LOCKS_REQUIRED(run_mu_);
  storage::Env* env_ = nullptr;
  std::string hotlist_path_;
  cache::ModelFileIdentity identity_;
  std::vector<cache::HotlistEntry> hotlist_previous_;

  // Serialises generations: one forward pass at a time.
  absl::Mutex run_mu_;
  SessionTable sessions_ ABSL_GUARDED_BY(run_mu_);

  std::atomic<int> active_{0};
  std::atomic<int> open_sessions_{0};  // sessions_.size(), readable without run_mu_.
  mutable absl::Mutex stats_mu_;
  absl::Time last_used_ ABSL_GUARDED_BY(stats_mu_) = absl::Now();
  int64_t requests_ ABSL_GUARDED_BY(stats_mu_) = 0;
  int64_t failed_requests_ ABSL_GUARDED_BY(stats_mu_) = 0;
  int64_t tokens_ ABSL_GUARDED_BY(stats_mu_) = 0;
  double compute_ms_ ABSL_GUARDED_BY(stats_mu_) = 0;
  double last_decode_tps_ ABSL_GUARDED_BY(stats_mu_) = 0;
};

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_LOADED_MODEL_H_
