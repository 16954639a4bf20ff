#include "daemon/http/completion_stream.h"

#include <atomic>
#include <deque>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "daemon/engine/generation.h"
#include "daemon/http/api_error.h"
#include "daemon/http/openai_response.h"
#include "daemon/http/sse.h"

namespace waste::http {

void PendingSinks::Add() {
  absl::MutexLock lock(&mu_);
  ++count_;
}

void PendingSinks::Done() {
  absl::MutexLock lock(&mu_);
  --count_;
}

void PendingSinks::WaitForNone() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* count) { return *count == 0; }, &count_));
}

namespace {

constexpr char kJson[] = "application/json";

// A model that exists but fails to load (a broken file, a budget under its
// floor) is the server's problem, not the request's: whatever code the
// loader chose becomes INTERNAL (500). Unknown or ambiguous names stay the
// client's (404, 400). On a blocking thread: Find reads the directories.
absl::Status LoadError(const engine::Engine& engine, const std::string& name,
                       const absl::Status& status) {
  const bool client_side = status.code() == absl::StatusCode::kNotFound ||
                           status.code() == absl::StatusCode::kResourceExhausted ||
                           status.code() == absl::StatusCode::kUnavailable;
  if (client_side || name.empty() || !engine.catalog().Find(name).ok()) return status;
  return absl::InternalError(absl::StrCat("cannot load model '", name, "': ", status.message()));
}

class CompletionStream final : public engine::GenerationSink,
                               public std::enable_shared_from_this<CompletionStream> {
 public:
  CompletionStream(const CompletionContext& context, CompletionRequest request,
                   std::shared_ptr<Exchange> exchange)
      : context_(context),
        request_(std::move(request)),
        exchange_(std::move(exchange)),
        recorder_(context.metrics, "http", "", absl::Now()),
        response_(request_, NewCompletionId(request_.kind), absl::ToUnixSeconds(absl::Now()),
                  request_.generate.model()) {}

  // On the strand.
  void Begin() {
    std::shared_ptr<CompletionStream> self = shared_from_this();
    exchange_->OnClientGone([self] { self->cancelled_.store(true); });
    std::shared_ptr<engine::LoadedModel> model =
        context_.engine->TryGetLoaded(request_.generate.model());
    if (model != nullptr) {
      Submit(std::move(model));
      return;
    }
    // Resolving the name and loading the model read files: not on an I/O
    // thread. Once loaded, later requests take the path above.
    context_.run_blocking([self] {
      if (self->exchange_->client_gone()) {
        self->recorder_.OnFinish(absl::CancelledError("the client went away"));
        return;
      }
      const std::string& name = self->request_.generate.model();
      absl::StatusOr<std::shared_ptr<engine::LoadedModel>> loaded =
          self->context_.engine->Get(name);
      if (!loaded.ok()) {
        self->Fail(LoadError(*self->context_.engine, name, loaded.status()));
        return;
      }
      self->Submit(*std::move(loaded));
    });
  }

  // engine::GenerationSink, called on the model's scheduler thread.
  bool Send(const v1::GenerateEvent& event) override {
    if (Cancelled()) return false;
    recorder_.OnEvent(event, absl::Now());
    bool post;
    {
      absl::MutexLock lock(&mu_);
      events_.push_back(event);
      post = !drain_posted_;
      drain_posted_ = true;
    }
    backlog_.fetch_add(1);
    if (post) exchange_->Post([self = self_] { self->Drain(); });
    return true;
  }

  int64_t Backlog() const override { return backlog_.load(); }

  bool Cancelled() const override { return cancelled_.load() || exchange_->client_gone(); }

  void Finish(const absl::Status& status) override {
    LogEnd(status);
    recorder_.OnFinish(status);
    std::shared_ptr<CompletionStream> self = std::move(self_);
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      final_status_ = status;
      drain_posted_ = true;
    }
    exchange_->Post([self] { self->Drain(); });
    // After the post: the server keeps its threads until no sink is held.
    context_.pending->Done();
  }

 private:
  // Any thread; the engine does not hold the sink yet.
  void Submit(std::shared_ptr<engine::LoadedModel> model) {
    recorder_.set_model(model->name());
    model_ = model;
    self_ = shared_from_this();
    context_.pending->Add();
    absl::Status status = model->Submit(request_.generate, this);
    if (!status.ok()) {
      // Finish will not be called: undo what it would have.
      self_.reset();
      Fail(status);
      context_.pending->Done();
    }
  }

  // Any thread, before or instead of the engine: answers with the error.
  void Fail(const absl::Status& status) {
    LogEnd(status);
    recorder_.OnFinish(status);
    exchange_->Post([self = shared_from_this(), status] { self->Complete(status); });
  }

  // One line for a request that failed (as the gRPC face logs them).
  void LogEnd(const absl::Status& status) const {
    if (status.ok() || status.code() == absl::StatusCode::kCancelled) return;
    const std::string& model = request_.generate.model();
    WLOG(INFO) << "http completion " << (model.empty() ? "(default model)" : model)
               << " ended: " << status;
  }

  // On the strand: hands queued events to the client.
  void Drain() {
    std::deque<v1::GenerateEvent> events;
    bool finished;
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      events.swap(events_);
      finished = finished_;
      status = final_status_;
      drain_posted_ = finished;
    }
    const int64_t n = static_cast<int64_t>(events.size());
    if (request_.stream) {
      std::string out;
      for (const v1::GenerateEvent& event : events) out += response_.StreamEvent(event);
      if (!out.empty()) {
        // The 200 goes out with the first bytes, so an error before them
        // (a full queue, a prompt too long) still gets its own status.
        StartStreamOnce();
        exchange_->Write(std::move(out),
                         [self = shared_from_this(), n] { self->backlog_.fetch_sub(n); });
      } else {
        backlog_.fetch_sub(n);
      }
    } else {
      for (const v1::GenerateEvent& event : events) response_.Add(event);
      backlog_.fetch_sub(n);
    }
    if (finished) Complete(status);
  }

  // On the strand: the end of the answer (once: a drain posted by Send
  // may run after Finish's and see it finished too).
  void Complete(const absl::Status& status) {
    if (completed_) return;
    completed_ = true;
    if (status.ok() && request_.stream) {
      StartStreamOnce();  // The done event's bytes (finish chunk, [DONE]) are written.
      exchange_->EndStream();
    } else if (status.ok()) {
      exchange_->Respond(200, kJson, response_.Body());
    } else if (stream_started_) {
      // Too late for a status: the error goes in the stream, as OpenAI's do.
      exchange_->Write(CompletionResponse::StreamError(ErrorFromStatus(status)), nullptr);
      exchange_->EndStream();
    } else {
      ApiError error = ErrorFromStatus(status);
      exchange_->Respond(error.status, kJson, error.ToJson());
    }
  }

  void StartStreamOnce() {
    if (stream_started_) return;
    stream_started_ = true;
    exchange_->StartStream(kSseContentType);
  }

  const CompletionContext context_;
  const CompletionRequest request_;
  const std::shared_ptr<Exchange> exchange_;
  std::shared_ptr<engine::LoadedModel> model_;
  // Held while the engine holds the sink (from Submit to Finish).
  std::shared_ptr<CompletionStream> self_;

  // The scheduler thread's side.
  metrics::RequestRecorder recorder_;
  std::atomic<bool> cancelled_{false};
  std::atomic<int64_t> backlog_{0};

  absl::Mutex mu_;
  std::deque<v1::GenerateEvent> events_ ABSL_GUARDED_BY(mu_);
  bool drain_posted_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);

  // The strand's side.
  CompletionResponse response_;
  bool stream_started_ = false;
  bool completed_ = false;
};

}  // namespace

void StartCompletion(const CompletionContext& context, CompletionRequest request,
                     std::shared_ptr<Exchange> exchange) {
  auto stream =
      std::make_shared<CompletionStream>(context, std::move(request), std::move(exchange));
  stream->Begin();
}

}  // namespace waste::http
