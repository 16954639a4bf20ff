#include "daemon/service/generate_reactor.h"

#include <atomic>
#include <deque>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "daemon/engine/generation.h"

namespace waste {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

namespace {

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateEvent>,
                              public engine::GenerationSink {
 public:
  // The request outlives the reactor (gRPC frees it after OnDone).
  GenerateReactor(engine::Engine* engine, const v1::GenerateRequest* request, absl::Time deadline,
                  metrics::RequestMetrics* metrics)
      : request_(*request), deadline_(deadline), recorder_(metrics, "grpc", "", absl::Now()) {
    std::shared_ptr<engine::LoadedModel> model = engine->TryGetLoaded(request->model());
    if (model != nullptr) {
      Submit(*model);
      return;
    }
    // Resolving the name and loading the model read files: not on a gRPC
    // thread. Once loaded, later requests take the path above.
    std::thread([this, engine] {
      absl::StatusOr<std::shared_ptr<engine::LoadedModel>> loaded = engine->Get(request_.model());
      if (loaded.ok()) {
        Submit(**loaded);
      } else {
        Finish(loaded.status());
      }
    }).detach();
  }

  // gRPC's side.
  void OnWriteDone(bool ok) override {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      write_in_flight_ = false;
      if (!ok) {
        // The stream is broken: the client went away.
        cancelled_.store(true);
        queue_.clear();
      }
      action = NextActionLocked();
    }
    Perform(action);
  }

  void OnCancel() override { cancelled_.store(true); }

  void OnDone() override {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      grpc_done_ = true;
      last = engine_done_;
    }
    if (last) delete this;
  }

  // The engine's side (engine::GenerationSink), called on the model's
  // scheduler thread.
  bool Send(const v1::GenerateEvent& event) override {
    if (cancelled_.load()) return false;
    recorder_.OnEvent(event, absl::Now());
    Action action;
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(event);
      action = NextActionLocked();
    }
    Perform(action);
    return true;
  }

  int64_t Backlog() const override {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(queue_.size());
  }

  bool Cancelled() const override { return cancelled_.load(); }

  void Finish(const absl::Status& status) override {
    recorder_.OnFinish(status);
    if (!status.ok() && status.code() != absl::StatusCode::kCancelled) {
      WLOG(INFO) << "generate "
                 << (request_.model().empty() ? "(default model)" : request_.model())
                 << " ended: " << status;
    }
    Action action;
    {
      absl::MutexLock lock(&mu_);
      final_status_ = ToGrpcStatus(status);
      finished_ = true;
      action = NextActionLocked();
    }
    Perform(action);
    bool last;
    {
      absl::MutexLock lock(&mu_);
      engine_done_ = true;
      last = grpc_done_;
    }
    if (last) delete this;
  }

 private:
  void Submit(engine::LoadedModel& model) {
    recorder_.set_model(model.name());
    absl::Status status = model.Submit(request_, this, deadline_);
    if (!status.ok()) Finish(status);
  }

  // What to do once the lock is released: gRPC calls are never made under
  // mu_, in case a reaction runs inline.
  struct Action {
    const v1::GenerateEvent* write = nullptr;
    bool finish = false;
    grpc::Status status;
  };

  Action NextActionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Action action;
    if (write_in_flight_) return action;
    if (!queue_.empty()) {
      write_in_flight_ = true;
      action.write = &queue_.front();
    } else if (finished_ && !finish_called_) {
      finish_called_ = true;
      action.finish = true;
      action.status = final_status_;
    }
    return action;
  }

  void Perform(const Action& action) {
    if (action.write != nullptr) StartWrite(action.write);
    if (action.finish) grpc::ServerWriteReactor<v1::GenerateEvent>::Finish(action.status);
  }

  const v1::GenerateRequest& request_;
  const absl::Time deadline_;
  mutable absl::Mutex mu_;
  // Events waiting to be written; the front one is being written when
  // write_in_flight_ (deque keeps it in place while others are pushed).
  std::deque<v1::GenerateEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  bool engine_done_ ABSL_GUARDED_BY(mu_) = false;
  bool grpc_done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> cancelled_{false};
  // Before Submit on the thread that submits; then on the scheduler's.
  metrics::RequestRecorder recorder_;
};

class RefusedGenerate final : public grpc::ServerWriteReactor<v1::GenerateEvent> {
 public:
  explicit RefusedGenerate(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerWriteReactor<v1::GenerateEvent>* StartGenerate(engine::Engine* engine,
                                                           const v1::GenerateRequest* request,
                                                           absl::Time deadline,
                                                           metrics::RequestMetrics* metrics) {
  return new GenerateReactor(engine, request, deadline, metrics);
}

grpc::ServerWriteReactor<v1::GenerateEvent>* RefuseGenerate(const grpc::Status& status) {
  return new RefusedGenerate(status);
}

}  // namespace waste
