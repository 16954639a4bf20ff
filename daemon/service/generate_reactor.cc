#include "daemon/service/generate_reactor.h"

#include <atomic>
#include <deque>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "storage/logging.h"

namespace waste {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

namespace {

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateEvent> {
 public:
  GenerateReactor(engine::Engine* engine, const v1::GenerateRequest* request) {
    // The request outlives the reactor (gRPC frees it after OnDone), and the
    // worker never touches `this` after it has marked itself done.
    std::thread([this, engine, request] { Run(engine, *request); }).detach();
  }

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
      last = worker_done_;
    }
    if (last) delete this;
  }

 private:
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
    if (action.finish) Finish(action.status);
  }

  bool Push(const v1::GenerateEvent& event) {
    if (cancelled_.load()) return false;
    Action action;
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(event);
      action = NextActionLocked();
    }
    Perform(action);
    return true;
  }

  void Run(engine::Engine* engine, const v1::GenerateRequest& request) {
    absl::Status status;
    absl::StatusOr<std::shared_ptr<engine::LoadedModel>> model = engine->Get(request.model());
    if (!model.ok()) {
      status = model.status();
    } else {
      status = (*model)->Generate(
          request, [this](const v1::GenerateEvent& event) { return Push(event); }, &cancelled_);
    }
    if (!status.ok()) {
      // Successful requests log their summary in the engine; these end here.
      WLOG(INFO) << "generate " << (request.model().empty() ? "(default model)" : request.model())
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
      worker_done_ = true;
      last = grpc_done_;
    }
    if (last) delete this;
  }

  absl::Mutex mu_;
  // Events waiting to be written; the front one is being written when
  // write_in_flight_ (deque keeps it in place while others are pushed).
  std::deque<v1::GenerateEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  bool worker_done_ ABSL_GUARDED_BY(mu_) = false;
  bool grpc_done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> cancelled_{false};
};

}  // namespace

grpc::ServerWriteReactor<v1::GenerateEvent>* StartGenerate(engine::Engine* engine,
                                                           const v1::GenerateRequest* request) {
  return new GenerateReactor(engine, request);
}

}  // namespace waste
