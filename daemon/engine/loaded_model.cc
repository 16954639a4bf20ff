#include "daemon/engine/loaded_model.h"

#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/cache/streaming_store.h"
#include "daemon/engine/planning.h"
#include "daemon/engine/stats.h"
#include "daemon/model/device_weights.h"
#include "daemon/text/utf8.h"
#include "daemon/text/vocab_gguf.h"
#include "storage/split_gguf.h"

namespace waste::engine {
namespace {

storage::IoEngine ParseIoEngine(const std::string& name) {
  if (name == "io_uring") return storage::IoEngine::kIoUring;
  if (name == "threads") return storage::IoEngine::kThreads;
  if (name == "pread") return storage::IoEngine::kSync;
  return storage::IoEngine::kAuto;
}

// The experts of the model's warm hotlist, hottest first, for the VRAM
// tier; none when there is no hotlist or it does not match the model.
std::vector<memory::ChunkId> HotExperts(storage::Env* env, const std::string& state_dir,
                                        const std::string& path,
                                        const std::vector<memory::ChunkSpec>& chunks) {
  std::vector<memory::ChunkId> hot;
  absl::StatusOr<cache::ModelFileIdentity> identity = cache::IdentifyModelFile(env, path, chunks);
  if (!identity.ok()) return hot;
  absl::StatusOr<std::vector<cache::HotlistEntry>> entries =
      cache::LoadHotlist(env, cache::HotlistPathFor(state_dir, path), *identity, chunks);
  if (!entries.ok()) return hot;
  for (const cache::HotlistEntry& entry : *entries) hot.push_back(entry.chunk);
  return hot;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::Load(storage::Env* env,
                                                               const std::string& name,
                                                               const std::string& path,
                                                               const v1::ModelConfig& config,
                                                               const std::string& state_dir,
                                                               uint64_t max_saved_sessions_bytes) {
  absl::Time start = absl::Now();
  auto loaded = std::unique_ptr<LoadedModel>(new LoadedModel());
  loaded->name_ = name;
  loaded->path_ = path;
  loaded->config_ = config;
  loaded->stamp_ = StampOf(path);
  ASSIGN_OR_RETURN(loaded->gguf_, storage::GgufFile::Open(env, path));
  ASSIGN_OR_RETURN(loaded->model_, model::Model::Create(*loaded->gguf_));
  ASSIGN_OR_RETURN(text::Vocab vocab, text::VocabFromGguf(*loaded->gguf_));
  ASSIGN_OR_RETURN(loaded->tokenizer_, text::Tokenizer::Create(std::move(vocab)));
  const model::HParams& hp = loaded->model_->hparams();
  loaded->context_length_ = ContextLengthFor(hp, config);
  // The budget covers everything: pinned weights, streaming slots, the KV
  // cache and scratch. Under the floor the load is refused, never swapped.
  std::vector<memory::ChunkId> hot_experts;
  if (config.vram_budget_bytes() > 0 && !state_dir.empty()) {
    hot_experts = HotExperts(env, state_dir, path, loaded->model_->chunks());
  }
  absl::StatusOr<ModelPlan> planned =
      PlanModel(*loaded->model_, config, loaded->context_length_, hot_experts);
  if (planned.ok() && planned->plan.vram.enabled()) {
    // The VRAM tier needs a GPU; without one the model runs on the CPU
    // exactly as with no VRAM budget.
    absl::StatusOr<std::unique_ptr<gpu::Device>> device = model::OpenDevice("cuda");
    if (device.ok() && (*device)->memory_bytes() < planned->plan.vram.budget_bytes) {
      device = absl::ResourceExhaustedError(absl::StrCat((*device)->name(), " has ",
                                                         (*device)->memory_bytes(),
                                                         " bytes free, less than the VRAM budget"));
    }
    if (device.ok()) {
      loaded->device_ = *std::move(device);
    } else {
      WLOG(WARNING) << name << ": vram_budget " << config.vram_budget_bytes()
                    << " bytes is not used: " << device.status().message()
                    << "; running on the CPU";
      v1::ModelConfig cpu_only = config;
      cpu_only.clear_vram_budget_bytes();
      planned = PlanModel(*loaded->model_, cpu_only, loaded->context_length_);
    }
  }
  if (planned.status().code() == absl::StatusCode::kResourceExhausted) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load ", name, ": ", planned.status().message()));
  }
  if (!planned.ok()) return planned.status();
  loaded->plan_ = *std::move(planned);
  const memory::MemoryPlan& plan = loaded->plan_.plan;
  storage::ReadOptions read_options;
  read_options.direct = !config.has_direct_io() || config.direct_io();
  ASSIGN_OR_RETURN(loaded->file_, storage::OpenModelFile(env, *loaded->gguf_, read_options));
  storage::ReadQueueOptions io;
  io.engine = ParseIoEngine(config.io_engine());
  if (loaded->gguf_->split_count() > 1 && io.engine == storage::IoEngine::kIoUring) {
    // The io_uring queue reads one file; a split model's joined parts are
    // read by threads (measured on par: bench on a 4-part ds-128x).
    WLOG(INFO) << path << ": the " << loaded->gguf_->split_count()
               << " parts of a split model are read by the threads engine, not io_uring";
    io.engine = storage::IoEngine::kThreads;
  }
  if (config.has_io_depth()) io.depth = config.io_depth();
  if (config.has_io_threads()) io.threads = config.io_threads();
  cache::StreamingStoreOptions store_options = cache::StreamingStoreOptions::FromPlan(plan);
  store_options.io = io;
  if (!config.has_repack_resident() || config.repack_resident()) {
    const model::Model* m = loaded->model_.get();
    store_options.repack_pinned = [m](memory::ChunkId id, uint8_t* slot) {
      model::InterleaveChunk(*m, id, slot);
    };
  }
  if (config.cache_policy() == v1::CACHE_POLICY_LRU) store_options.policy = cache::PolicyKind::kLru;
  if (config.cache_policy() == v1::CACHE_POLICY_LFU) {
    // Expert popularity must outlive an eviction to be worth anything (see
    // the routing-trace measurements in cache_policy.h): LFU with ageing.
    store_options.policy =
        plan.sizes.experts_per_token > 0 ? cache::PolicyKind::kLfuAged : cache::PolicyKind::kLfu;
  }
  ASSIGN_OR_RETURN(loaded->store_,
                   cache::StreamingChunkStore::Create(env, *loaded->file_, loaded->model_->chunks(),
                                                      store_options));
  if (loaded->device_ != nullptr) {
    ASSIGN_OR_RETURN(
        loaded->device_weights_,
        model::DeviceWeights::Load(loaded->device_.get(), *loaded->model_, *loaded->file_,
                                   plan.in_vram, model::kMaxProductRows));
    WLOG(INFO) << name << ": " << plan.vram.chunks.size() << " chunks (" << plan.vram.weight_bytes
               << " bytes) in VRAM on " << loaded->device_->name() << " in "
               << loaded->device_weights_->stats().load_seconds << " s";
  }
  loaded->env_ = env;
  bool has_experts = false;
  for (const cache::ChunkSpec& chunk : loaded->model_->chunks()) {
    has_experts |= chunk.kind == cache::ChunkKind::kExpert;
  }
  bool warm = !config.has_warm_hotlist() || config.warm_hotlist();
  if (has_experts && warm && !state_dir.empty() && !plan.all_resident()) {
    std::error_code ec;
    std::filesystem::create_directories(state_dir, ec);
    if (ec) {
      WLOG(WARNING) << "cannot create state directory " << state_dir << " (" << ec.message()
                    << "); the expert hotlist is not kept";
    } else {
      ASSIGN_OR_RETURN(loaded->identity_,
                       cache::IdentifyModelFile(env, path, loaded->model_->chunks()));
      loaded->hotlist_path_ = cache::HotlistPathFor(state_dir, path);
      int preloaded = 0;
      ASSIGN_OR_RETURN(
          loaded->hotlist_previous_,
          cache::WarmExpertCache(env, loaded->hotlist_path_, loaded->identity_,
                                 loaded->model_->chunks(), loaded->store_.get(), &preloaded));
      WLOG(INFO) << name << ": preloaded " << preloaded << " hot experts from "
                 << loaded->hotlist_path_;
    }
  }
  int threads = config.has_threads() ? config.threads() : kernels::ThreadPool::DefaultThreads();
  loaded->pool_ = std::make_unique<kernels::ThreadPool>(std::max(1, threads));
  loaded->text_.model_name = name;
  loaded->text_.tokenizer = loaded->tokenizer_.get();
  loaded->text_.chat_template = loaded->gguf_->GetString("tokenizer.chat_template").value_or("");
  loaded->text_.context_length = loaded->context_length_;
  if (!state_dir.empty()) {
    ASSIGN_OR_RETURN(cache::ModelFileIdentity identity,
                     cache::IdentifyModelFile(env, path, loaded->model_->chunks()));
    loaded->session_store_ =
        std::make_unique<SessionStore>(SessionStore::DirFor(state_dir, path), std::move(identity),
                                       loaded->model_.get(), max_saved_sessions_bytes);
  }
  SchedulerOptions scheduling;
  scheduling.session_store = loaded->session_store_.get();
  scheduling.max_batch = MaxConcurrentRequests(config);
  scheduling.max_queued = MaxQueuedRequests(config);
  // Streamed weights are read once per step: a prompt takes steps as large
  // as the plan sized the workspace for.
  scheduling.max_step_tokens = plan.step_tokens;
  if (!plan.all_resident()) scheduling.prefill_chunk = plan.step_tokens;
  if (config.has_prefill_chunk()) scheduling.prefill_chunk = std::max(1, config.prefill_chunk());
  scheduling.session_capacity = static_cast<size_t>(plan.sessions);
  scheduling.kv_type = KvTypeFor(config);
  scheduling.router_lookahead =
      config.has_router_lookahead() ? config.router_lookahead() : plan.lookahead_by_default();
  scheduling.device_weights = loaded->device_weights_.get();
  LoadedModel* raw = loaded.get();
  loaded->scheduler_ =
      std::make_unique<Scheduler>(loaded->model_.get(), loaded->store_.get(), loaded->pool_.get(),
                                  &loaded->text_, scheduling, [raw] { raw->SaveHotlist(); });
  WLOG(INFO) << "loaded " << name << " (" << hp.arch_name << ", " << hp.n_layer << " layers, "
             << loaded->model_->weight_bytes() << " weight bytes, budget " << plan.budget_bytes
             << ", " << plan.pinned_bytes << " pinned, " << plan.streaming_slots
             << " streaming slots, " << plan.read_bytes_per_token << " bytes read per token, "
             << plan.sessions << " concurrent sessions) in "
             << absl::FormatDuration(absl::Now() - start) << ", context "
             << loaded->context_length_;
  return loaded;
}

LoadedModel::~LoadedModel() {
  scheduler_.reset();  // Lets queued and running generations finish.
  SaveHotlist();
}

absl::Status LoadedModel::Submit(const v1::GenerateRequest& request, GenerationSink* sink,
                                 absl::Time deadline) {
  return scheduler_->Submit(request, sink, deadline);
}

absl::Status LoadedModel::Generate(const v1::GenerateRequest& request, const EventSink& sink,
                                   const std::atomic<bool>* cancelled) {
  // Forwards the events to `sink` and waits for the end.
  class WaitingSink : public GenerationSink {
   public:
    WaitingSink(const EventSink& sink, const std::atomic<bool>* cancelled)
        : sink_(sink), cancelled_(cancelled) {}
    bool Send(const v1::GenerateEvent& event) override {
      if (!gone_ && !sink_(event)) gone_ = true;
      return !gone_;
    }
    bool Cancelled() const override { return cancelled_ != nullptr && cancelled_->load(); }
    void Finish(const absl::Status& status) override {
      absl::MutexLock lock(&mu_);
      status_ = status;
      done_ = true;
    }
    absl::Status Wait() {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&done_));
      return status_;
    }

   private:
    const EventSink& sink_;
    const std::atomic<bool>* cancelled_;
    bool gone_ = false;
    absl::Mutex mu_;
    bool done_ ABSL_GUARDED_BY(mu_) = false;
    absl::Status status_ ABSL_GUARDED_BY(mu_);
  };
  WaitingSink waiting(sink, cancelled);
  RETURN_IF_ERROR(Submit(request, &waiting));
  return waiting.Wait();
}

int LoadedModel::active_requests() const {
  const SchedulerStats stats = scheduler_->Stats();
  return stats.running + stats.queued;
}

void LoadedModel::SaveHotlist() {
  if (hotlist_path_.empty()) return;
  absl::Status status = cache::SaveHotlist(env_, hotlist_path_, identity_, model_->chunks(),
                                           store_->acquire_counts(), hotlist_previous_);
  if (!status.ok()) WLOG(WARNING) << "cannot save the expert hotlist: " << status.message();
}

absl::StatusOr<v1::TokenizeResponse> LoadedModel::Tokenize(
    const v1::TokenizeRequest& request) const {
  v1::TokenizeResponse response;
  for (text::TokenId id :
       tokenizer_->Encode(request.text(), request.add_special(), request.parse_special())) {
    response.add_ids(id);
    response.add_pieces(text::SanitizeUtf8(tokenizer_->Piece(id)));
  }
  return response;
}

absl::StatusOr<v1::DetokenizeResponse> LoadedModel::Detokenize(
    const v1::DetokenizeRequest& request) const {
  std::vector<text::TokenId> ids(request.ids().begin(), request.ids().end());
  for (text::TokenId id : ids) {
    if (id < 0 || id >= tokenizer_->vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ids: token id ", id, " is outside the vocabulary of ", tokenizer_->vocab_size()));
    }
  }
  text::DetokenizeOptions options;
  options.remove_special = !request.render_special();
  options.unparse_special = request.render_special();
  v1::DetokenizeResponse response;
  response.set_text(tokenizer_->Decode(ids, options));
  return response;
}

v1::ModelStats LoadedModel::Stats() const {
  const SchedulerStats sched = scheduler_->Stats();
  v1::ModelStats stats;
  stats.set_model(name_);
  *stats.mutable_totals() = ToEngineStats(store_->Stats());
  stats.mutable_totals()->set_tokens(sched.tokens);
  stats.mutable_totals()->set_compute_ms(sched.compute_ms);
  stats.set_requests(sched.requests);
  stats.set_failed_requests(sched.failed_requests);
  stats.set_last_decode_tokens_per_second(sched.last_decode_tps);
  stats.set_sessions(sched.sessions);
  const memory::MemoryPlan& plan = plan_.plan;
  stats.set_ram_budget_bytes(static_cast<int64_t>(plan.budget_bytes));
  // What is allocated now: the pool, the step's scratch, and the KV caches
  // of the open sessions.
  stats.set_ram_used_bytes(
      static_cast<int64_t>(plan.pool_bytes() + plan.sizes.scratch_bytes + sched.session_bytes));
  stats.set_running_requests(sched.running);
  stats.set_queued_requests(sched.queued);
  stats.set_steps(sched.steps);
  stats.set_step_tokens(sched.step_tokens);
  stats.set_mean_batch_size(sched.steps > 0 ? static_cast<double>(sched.batch_sessions) /
                                                  static_cast<double>(sched.steps)
                                            : 0);
  stats.set_max_batch_size(sched.max_batch_seen);
  const SchedulerOptions& options = scheduler_->options();
  stats.set_max_concurrent_requests(options.max_batch);
  stats.set_max_queued_requests(options.max_queued);
  stats.set_session_capacity(static_cast<int32_t>(options.session_capacity));
  stats.set_last_step_batch_size(sched.last_step_batch);
  stats.set_last_step_tokens(static_cast<int32_t>(sched.last_step_tokens));
  stats.set_last_step_bytes_read(sched.last_step_bytes_read);
  stats.set_last_step_ms(sched.last_step_ms);
  stats.set_mean_queue_ms(sched.admitted > 0 ? sched.queue_ms_sum / sched.admitted : 0);
  return stats;
}

absl::Time LoadedModel::last_used() const {
  return std::max(loaded_at_, scheduler_->Stats().last_finished);
}

LoadedModel::FileStamp LoadedModel::StampOf(const std::string& path) {
  FileStamp stamp;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return stamp;
  stamp.device = static_cast<uint64_t>(st.st_dev);
  stamp.inode = static_cast<uint64_t>(st.st_ino);
  stamp.size = static_cast<int64_t>(st.st_size);
  stamp.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return stamp;
}

bool LoadedModel::FileChanged(std::string* how) const {
  const FileStamp now = StampOf(path_);
  if (now.size < 0 || stamp_.size < 0) return false;
  std::string what;
  if (now.device != stamp_.device || now.inode != stamp_.inode) {
    what = "it was replaced by another file";
  } else if (now.size != stamp_.size) {
    what = absl::StrCat("its size changed from ", stamp_.size, " to ", now.size, " bytes");
  } else if (now.mtime_ns != stamp_.mtime_ns) {
    what = "it was rewritten (its modification time changed)";
  } else {
    return false;
  }
  if (how != nullptr) *how = absl::StrCat(path_, " changed since ", name_, " was loaded: ", what);
  return true;
}

v1::MemoryPlan LoadedModel::Plan() const { return ToProto(*model_, plan_); }

void LoadedModel::FillInfo(v1::ModelInfo* info) const {
  const model::HParams& hp = model_->hparams();
  info->set_name(name_);
  info->set_path(path_);
  info->set_size_bytes(static_cast<int64_t>(gguf_->disk_bytes()));
  info->set_loaded(true);
  info->set_architecture(hp.arch_name);
  info->set_context_length(static_cast<int32_t>(hp.n_ctx_train));
}

}  // namespace waste::engine
