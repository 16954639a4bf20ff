#include "daemon/engine/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/logging.h"

namespace waste::engine {
namespace {

// How long the loop naps when every session in the batch is paused.
constexpr absl::Duration kPausedNap = absl::Milliseconds(2);

}  // namespace

Scheduler::Scheduler(const model::Model* model, cache::ChunkStore* store, kernels::ThreadPool* pool,
                     const ModelText* text, SchedulerOptions options, std::function<void()> on_idle)
    : model_(model),
      store_(store),
      text_(text),
      options_(options),
      step_tokens_limit_(options.max_step_tokens > 0 ? options.max_step_tokens
                                                     : model::kDefaultStepTokens),
      on_idle_(std::move(on_idle)),
      forward_(model, store, pool, model::ForwardOptions{.max_step_tokens = step_tokens_limit_}),
      sessions_(options.session_capacity) {
  forward_.set_router_lookahead(options.router_lookahead);
  forward_.set_device_weights(options.device_weights);
  sessions_.set_on_evict([this](const Session& session) { SaveKept(session); });
  {
    absl::MutexLock lock(&mu_);
    stats_.last_finished = absl::InfinitePast();
  }
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  for (const Session& session : sessions_.sessions()) SaveKept(session);
}

void Scheduler::Retire() {
  absl::Notification done;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;  // The destructor saves them.
    tasks_.push_back([&] {
      retiring_ = true;
      for (Session& session : sessions_.sessions()) {
        if (!session.busy) SaveRetired(session);
      }
      done.Notify();
    });
  }
  done.WaitForNotification();
}

void Scheduler::SaveRetired(Session& session) {
  SaveKept(session);
  // Saved once: a copy that lives on must not overwrite a newer save by the
  // model's next copy (a request of this session queued here keeps it again).
  session.keep = false;
}

void Scheduler::SaveKept(const Session& session) {
  if (!session.keep || options_.session_store == nullptr) return;
  absl::StatusOr<SavedSessionInfo> saved = options_.session_store->Save(session);
  if (saved.ok()) {
    WLOG(INFO) << text_->model_name << ": saved session " << session.id << " (" << saved->tokens
               << " tokens, " << saved->bytes << " bytes) to " << saved->path;
  } else {
    WLOG(WARNING) << text_->model_name << ": cannot save session " << session.id << ": "
                  << saved.status();
  }
}

absl::StatusOr<SavedSessionInfo> Scheduler::SaveSession(const std::string& id) {
  if (options_.session_store == nullptr) {
    return absl::FailedPreconditionError(
        "sessions cannot be saved: the daemon has no state directory");
  }
  absl::Notification done;
  absl::StatusOr<SavedSessionInfo> result;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the model is being unloaded");
    tasks_.push_back([&] {
      Session* session = sessions_.Find(id);
      if (session == nullptr) {
        result = absl::NotFoundError(absl::StrCat("session '", id, "' is not open"));
      } else {
        result = options_.session_store->Save(*session);
      }
      done.Notify();
    });
  }
  done.WaitForNotification();
  return result;
}

void Scheduler::CancelAll(const std::string& reason) {
  std::deque<std::unique_ptr<Generation>> queued;
  {
    absl::MutexLock lock(&mu_);
    queued.swap(queue_);
    stats_.queued = 0;
    stats_.requests += static_cast<int64_t>(queued.size());
    tasks_.push_back([this, reason] {
      for (auto& run : running_) End(run.get(), absl::CancelledError(reason));
    });
  }
  for (auto& gen : queued) gen->sink()->Finish(absl::CancelledError(reason));
}

void Scheduler::RunTasks() {
  std::deque<std::function<void()>> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task();
}

absl::Status Scheduler::Submit(const v1::GenerateRequest& request, GenerationSink* sink,
                               absl::Time deadline) {
  if (!request.session_id().empty() && !IsValidSessionId(request.session_id())) {
    return absl::InvalidArgumentError(
        "session_id: use the id the daemon returned (1-64 of [A-Za-z0-9_-])");
  }
  absl::StatusOr<std::unique_ptr<Generation>> gen =
      Generation::Create(request, text_, sink, absl::Now(), deadline);
  if (!gen.ok()) return gen.status();
  // Without a session its tokens are known now: they pick the KV cache to
  // reuse (cache_prompt), and a bad prompt is refused before it queues.
  if (request.session_id().empty()) {
    if (absl::Status resolved = (*gen)->Resolve(nullptr); !resolved.ok()) return resolved;
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    return absl::UnavailableError(
        absl::StrCat("model ", text_->model_name, " is being unloaded; retry"));
  }
  // Requests that can join the batch at the next step do not count as
  // queued.
  const int free_places = std::max(0, options_.max_batch - stats_.running);
  if (static_cast<int>(queue_.size()) >= options_.max_queued + free_places) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model ", text_->model_name, " is busy: ", stats_.running, " requests running (",
        "max_concurrent_requests ", options_.max_batch, ") and ", queue_.size(),
        " waiting (max_queued_requests ", options_.max_queued, "); retry later"));
  }
  queue_.push_back(*std::move(gen));
  stats_.queued = static_cast<int>(queue_.size());
  return absl::OkStatus();
}

SchedulerStats Scheduler::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Scheduler::Loop() {
  while (true) {
    RunTasks();
    Admit();
    if (running_.empty()) {
      if (ended_since_idle_ && on_idle_) on_idle_();
      ended_since_idle_ = false;
      absl::MutexLock lock(&mu_);
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || !tasks_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&work));
      if (queue_.empty() && tasks_.empty() && stopping_) return;
      continue;
    }
    Reap(absl::Now());
    RemoveEnded();
    if (running_.empty()) continue;
    if (!RunStep()) absl::SleepFor(kPausedNap);
    RemoveEnded();
  }
}

bool Scheduler::Admit() {
  struct Admitted {
    std::unique_ptr<Generation> gen;
    Session* session;
    bool fresh;
    bool restore;  // A saved session to read back into `session`.
  };
  std::vector<Admitted> admitted;
  std::vector<std::pair<std::unique_ptr<Generation>, absl::Status>> refused;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (static_cast<int>(running_.size() + admitted.size()) >= options_.max_batch) break;
      const std::string& id = (*it)->request().session_id();
      Session* session = nullptr;
      bool fresh = false, restore = false;
      auto make_state = [this] {
        return std::make_unique<model::SequenceState>(*model_, text_->context_length,
                                                      options_.kv_type);
      };
      if (!id.empty()) {
        session = sessions_.Find(id);
        if (session == nullptr && options_.session_store != nullptr &&
            options_.session_store->Exists(id)) {
          if (!sessions_.CanCreate()) break;  // Restored into a KV cache: wait for one.
          session = sessions_.Create(make_state, id);
          restore = true;
        }
        if (session == nullptr) {
          refused.emplace_back(
              std::move(*it), absl::NotFoundError(absl::StrCat(
                                  "session '", id, "' does not exist (it may have been evicted)")));
          it = queue_.erase(it);
          continue;
        }
        if (session->busy) {  // Another request of the session runs: wait for it.
          ++it;
          continue;
        }
      } else {
        // cache_prompt: the idle shared KV cache that holds the longest
        // prefix of the prompt, if that is over half of it (a new cache
        // leaves the others for the requests they suit better), or any
        // prefix when a new one would drop a session anyway. Else a new
        // one; none free: wait, in arrival order, rather than exceed the
        // budget.
        const v1::GenerateRequest& request = (*it)->request();
        const bool shared = request.cache_prompt() && !request.keep_session();
        if (shared) {
          const size_t tokens = (*it)->tokens().size();
          session = sessions_.TakeOverLongestPrefix((*it)->tokens(),
                                                    sessions_.full() ? 1 : tokens / 2 + 1);
        }
        if (session == nullptr) {
          if (!sessions_.CanCreate()) break;
          session = sessions_.Create(make_state);
        }
        session->shared = shared;
        fresh = true;
      }
      session->busy = true;
      admitted.push_back({std::move(*it), session, fresh, restore});
      it = queue_.erase(it);
    }
    stats_.queued = static_cast<int>(queue_.size());
    // Counted as running from now, so Submit never sees a request in
    // neither place.
    stats_.running += static_cast<int>(admitted.size());
  }
  for (auto& [gen, status] : refused) {
    WLOG(INFO) << text_->model_name << ": request ended: " << status;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.requests;
      ++stats_.failed_requests;
    }
    gen->sink()->Finish(status);
  }
  const absl::Time now = absl::Now();
  const int64_t n_vocab = model_->hparams().n_vocab;
  for (Admitted& a : admitted) {
    if (a.restore) {
      absl::StatusOr<std::vector<int32_t>> tokens =
          options_.session_store->Load(a.session->id, a.session->state.get());
      if (!tokens.ok()) {
        WLOG(WARNING) << text_->model_name << ": cannot restore saved session " << a.session->id
                      << ": " << tokens.status();
        const std::string id = a.session->id;
        a.session->busy = false;
        sessions_.Erase(id);
        {
          absl::MutexLock lock(&mu_);
          ++stats_.requests;
          ++stats_.failed_requests;
          --stats_.running;
        }
        a.gen->sink()->Finish(absl::NotFoundError(
            absl::StrCat("session '", id, "' could not be restored: ", tokens.status().message())));
        continue;
      }
      a.session->tokens = *std::move(tokens);
      a.session->keep = true;
      WLOG(INFO) << text_->model_name << ": restored session " << a.session->id << " ("
                 << a.session->tokens.size() << " tokens)";
    }
    if (a.gen->request().keep_session()) a.session->keep = true;
    auto run = std::make_unique<Running>();
    run->session = a.session;
    run->gen = std::move(a.gen);
    Generation* gen = run->gen.get();
    {
      absl::MutexLock lock(&mu_);
      ++stats_.admitted;
      stats_.queue_ms_sum += absl::ToDoubleMilliseconds(now - gen->received());
    }
    running_.push_back(std::move(run));
    Running* r = running_.back().get();
    // (A request without a session was resolved at submission.)
    absl::Status status = a.fresh ? absl::OkStatus() : gen->Resolve(&a.session->tokens);
    if (!status.ok()) {
      End(r, status);
      continue;
    }
    // Reuse the cached prefix; at least the last token is recomputed so its
    // logits exist (and all of them where a sliding-window layer's ring no
    // longer holds the window before the prefix's end).
    const std::vector<int32_t>& full = gen->tokens();
    const size_t keep = static_cast<size_t>(a.session->state->Truncate(
        static_cast<int64_t>(std::min(CommonPrefix(a.session->tokens, full), full.size() - 1))));
    a.session->tokens.resize(keep);
    r->fed = keep;
    r->matrix_prompt = model::MatrixPrompt(static_cast<int64_t>(full.size() - keep));
    r->logits.resize(n_vocab);
    if (!gen->Start(a.session->id, keep, now)) {
      End(r, absl::CancelledError("the client went away"));
    }
  }
  UpdateGauges();
  return !admitted.empty() || !refused.empty();
}

bool Scheduler::Paused(Running* run, absl::Time now) {
  if (run->gen->sink()->Backlog() <= options_.max_backlog) {
    run->stalled_since = absl::InfiniteFuture();
    return false;
  }
  if (run->stalled_since == absl::InfiniteFuture()) run->stalled_since = now;
  return true;
}

void Scheduler::Reap(absl::Time now) {
  for (auto& r : running_) {
    if (r->ended) continue;
    Generation* gen = r->gen.get();
    if (gen->sink()->Cancelled()) {
      End(r.get(), absl::CancelledError("generation cancelled"));
    } else if (now > gen->deadline()) {
      End(r.get(),
          absl::DeadlineExceededError(absl::StrCat("the request's deadline passed after ",
                                                   gen->generated(), " generated tokens")));
    } else if (now - r->stalled_since > options_.stalled_client_limit) {
      End(r.get(),
          absl::ResourceExhaustedError(absl::StrCat(
              "the client took none of its last ", options_.max_backlog, " events for ",
              absl::FormatDuration(options_.stalled_client_limit), "; generation dropped")));
    }
  }
}

bool Scheduler::RunStep() {
  const absl::Time now = absl::Now();
  std::vector<Part> parts;
  int64_t budget = step_tokens_limit_;
  // One token for every decoding session, then prompt chunks, oldest first.
  for (auto& r : running_) {
    if (r->ended || !r->next.has_value() || Paused(r.get(), now)) continue;
    parts.push_back({r.get(), 1, true});
    --budget;
  }
  int64_t prefill = std::min(options_.prefill_chunk, budget);
  for (auto& r : running_) {
    if (prefill <= 0) break;
    if (r->ended || r->next.has_value() || Paused(r.get(), now)) continue;
    const size_t total = r->gen->tokens().size();
    const int64_t n = std::min<int64_t>(prefill, static_cast<int64_t>(total - r->fed));
    parts.push_back({r.get(), n, r->fed + n == total});
    prefill -= n;
  }
  if (parts.empty()) return false;
  Execute(parts);
  return true;
}

void Scheduler::Execute(std::vector<Part>& parts) {
  std::vector<model::SequenceStep> steps(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    Running* r = parts[i].run;
    model::SequenceStep& step = steps[i];
    step.state = r->session->state.get();
    if (r->next.has_value()) {
      step.tokens = std::span<const int32_t>(&*r->next, 1);
    } else {
      step.tokens = std::span<const int32_t>(r->gen->tokens()).subspan(r->fed, parts[i].tokens);
      step.prompt = r->matrix_prompt;
    }
    step.logits = parts[i].logits ? r->logits.data() : nullptr;
  }
  const cache::ChunkStoreStats before = store_->Stats();
  const absl::Time start = absl::Now();
  absl::Status status = forward_.Step(steps);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const cache::ChunkStoreStats after = store_->Stats();
  if (status.ok()) {
    Advance(parts, before, after, seconds);
    return;
  }
  if (parts.size() == 1) {
    End(parts[0].run, status);
    return;
  }
  // Which sessions needed what failed? Each alone: those that fail again
  // end, the others go on.
  WLOG(WARNING) << text_->model_name << ": a step of " << parts.size() << " sessions failed ("
                << status << "); retrying each alone";
  for (Part& part : parts) {
    std::vector<Part> one = {part};
    Execute(one);
  }
}

void Scheduler::Advance(std::vector<Part>& parts, const cache::ChunkStoreStats& before,
                        const cache::ChunkStoreStats& after, double seconds) {
  int64_t step_tokens = 0;
  for (const Part& p : parts) step_tokens += p.tokens;
  const int batch = static_cast<int>(parts.size());
  const double io_wait = after.io_wait_seconds - before.io_wait_seconds;
  const double compute = std::max(0.0, seconds - io_wait);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.steps;
    stats_.step_tokens += step_tokens;
    stats_.batch_sessions += batch;
    stats_.max_batch_seen = std::max(stats_.max_batch_seen, batch);
    stats_.last_step_batch = batch;
    stats_.last_step_tokens = step_tokens;
    stats_.last_step_bytes_read = after.bytes_read - before.bytes_read;
    stats_.last_step_ms = seconds * 1e3;
    stats_.moe_routed = forward_.moe_stats().routed;
    stats_.moe_expert_acquires = forward_.moe_stats().expert_acquires;
  }
  const absl::Time now = absl::Now();
  const int64_t n_vocab = model_->hparams().n_vocab;
  for (Part& p : parts) {
    Running* r = p.run;
    Session* session = r->session;
    if (r->next.has_value()) {
      session->tokens.push_back(*r->next);
      r->next.reset();
    } else {
      const std::vector<int32_t>& full = r->gen->tokens();
      session->tokens.insert(session->tokens.end(), full.begin() + r->fed,
                             full.begin() + r->fed + p.tokens);
      r->fed += p.tokens;
      if (p.logits) r->gen->Prefilled(now);
    }
    r->gen->AddStep(before, after, compute, p.tokens, step_tokens, batch);
    if (!p.logits) continue;
    const Generation::Next next = r->gen->OnLogits(
        r->logits.data(), n_vocab, static_cast<int64_t>(session->tokens.size()), now);
    if (next.token.has_value()) {
      r->next = next.token;
    } else if (next.finish == v1::FINISH_REASON_CANCELLED) {
      End(r, absl::CancelledError("generation cancelled"));
    } else {
      End(r, absl::OkStatus(), next.finish);
    }
  }
}

void Scheduler::End(Running* run, const absl::Status& status, v1::FinishReason finish) {
  if (run->ended) return;
  run->ended = true;
  const absl::Time now = absl::Now();
  Generation* gen = run->gen.get();
  if (status.ok()) {
    gen->Finish(finish, store_->Stats(), now);
  } else {
    WLOG(INFO) << text_->model_name << ": request ended after " << gen->generated()
               << " generated tokens: " << status;
  }
  // The KV cache holds exactly the session's tokens whatever happened: a
  // failed step advanced nothing.
  run->session->busy = false;
  if (retiring_) SaveRetired(*run->session);
  ended_since_idle_ = true;
  {
    // Counted before the sink hears of it, so a client that asks for stats
    // right after its request sees it.
    absl::MutexLock lock(&mu_);
    ++stats_.requests;
    if (!status.ok() && status.code() != absl::StatusCode::kCancelled) ++stats_.failed_requests;
    stats_.tokens += gen->tokens_computed();
    stats_.compute_ms += gen->compute_seconds() * 1e3;
    if (status.ok()) stats_.last_decode_tps = gen->decode_tokens_per_second();
    stats_.last_finished = now;
    stats_.running = static_cast<int>(
        std::count_if(running_.begin(), running_.end(),
                      [](const std::unique_ptr<Running>& r) { return !r->ended; }));
  }
  gen->sink()->Finish(status);
}

void Scheduler::RemoveEnded() {
  const size_t before = running_.size();
  std::erase_if(running_, [](const std::unique_ptr<Running>& r) { return r->ended; });
  if (running_.size() != before) UpdateGauges();
}

void Scheduler::UpdateGauges() {
  const int sessions = static_cast<int>(sessions_.size());
  const uint64_t bytes = sessions_.bytes();
  absl::MutexLock lock(&mu_);
  stats_.running =
      static_cast<int>(std::count_if(running_.begin(), running_.end(),
                                     [](const std::unique_ptr<Running>& r) { return !r->ended; }));
  stats_.sessions = sessions;
  stats_.session_bytes = bytes;
}

}  // namespace waste::engine
