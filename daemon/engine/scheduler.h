// The step loop of one loaded model: continuous batching.
//
// One thread per model runs steps. Between steps it admits waiting
// requests in arrival order (while the batch has room and a KV cache is
// free); each step carries one decode token for every decoding session plus
// prompt chunks of sessions still reading their prompt (at most
// prefill_chunk tokens a step, oldest first), and runs them all through one
// Forward::Step: every weight chunk is acquired once per step and used by
// every session in it. After the step each session whose logits came out
// samples its next token and sends it. Sessions finish, are cancelled, time
// out or fail independently; a request waiting for a place in the batch
// waits in the queue (bounded: past max_queued Submit fails at once).
//
// Back-pressure: a session whose client has not taken more than
// max_backlog events sits out the steps (its KV cache stays) until the
// client catches up; one stalled for stalled_client_limit is dropped with
// RESOURCE_EXHAUSTED.
//
// Weight read failures: a failed step is retried with each session alone,
// so only the sessions whose own step fails again end with the error.
//
// Thread-safety: Submit and Stats from any thread; everything else runs on
// the loop thread. The destructor stops admitting, lets running and queued
// requests finish (a cancelled client ends its request at the next step),
// then joins the loop.
#ifndef WASTE_DAEMON_ENGINE_SCHEDULER_H_
#define WASTE_DAEMON_ENGINE_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/engine/generation.h"
#include "daemon/engine/session_store.h"
#include "daemon/engine/sessions.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/model/forward.h"
#include "daemon/model/model.h"

namespace waste::engine {

struct SchedulerOptions {
  int max_batch = 4;           // Sessions per step.
  int max_queued = 64;         // Requests waiting for a place.
  int64_t prefill_chunk = 32;  // Prompt tokens per step (all sessions).
  // Rows of a step (its Forward's workspace is sized for them); 0:
  // model::kDefaultStepTokens.
  int64_t max_step_tokens = 0;
  size_t session_capacity = 1;  // KV caches the budget holds.
  kernels::ops::KvType kv_type = kernels::ops::KvType::kF16;
  bool router_lookahead = false;
  int64_t max_backlog = 64;  // Unsent events before a session pauses.
  absl::Duration stalled_client_limit = absl::Seconds(30);
  // Where sessions are saved and restored from (null: not kept). Borrowed.
  SessionStore* session_store = nullptr;
  // The VRAM tier: weights on a GPU (null: everything on the CPU). Borrowed.
  model::DeviceWeights* device_weights = nullptr;
};

// Counters and gauges of a scheduler.
struct SchedulerStats {
  int running = 0;
  int queued = 0;
  int sessions = 0;            // Open sessions (KV caches allocated).
  uint64_t session_bytes = 0;  // Their KV caches.
  int64_t requests = 0;        // Finished, successfully or not.
  int64_t failed_requests = 0;
  int64_t tokens = 0;  // Prompt tokens computed + generated.
  double compute_ms = 0;
  double last_decode_tps = 0;
  absl::Time last_finished;  // InfinitePast before the first.
  int64_t steps = 0;
  int64_t step_tokens = 0;
  int64_t batch_sessions = 0;  // Summed over steps.
  int max_batch_seen = 0;
  int last_step_batch = 0;
  int64_t last_step_tokens = 0;
  int64_t last_step_bytes_read = 0;
  double last_step_ms = 0;
  int64_t admitted = 0;
  double queue_ms_sum = 0;
  // MoE: (token, layer, expert) choices and expert chunks acquired (each
  // distinct expert of a step's union once), summed over steps.
  int64_t moe_routed = 0;
  int64_t moe_expert_acquires = 0;
};

class Scheduler {
 public:
  // `model`, `store`, `pool` and `text` must outlive the scheduler. The
  // loop is the only user of `store` and `pool` from now on. `on_idle` runs
  // on the loop thread when the batch empties after requests ended (the
  // engine saves the expert hotlist there).
  Scheduler(const model::Model* model, cache::ChunkStore* store, kernels::ThreadPool* pool,
            const ModelText* text, SchedulerOptions options, std::function<void()> on_idle = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a generation whose events go to `sink` (which must stay valid
  // until its Finish). Errors are returned and Finish is NOT called: bad
  // fields (INVALID_ARGUMENT), a full queue (RESOURCE_EXHAUSTED with the
  // numbers), a scheduler shutting down (UNAVAILABLE).
  absl::Status Submit(const v1::GenerateRequest& request, GenerationSink* sink,
                      absl::Time deadline = absl::InfiniteFuture());

  SchedulerStats Stats() const;
  const SchedulerOptions& options() const { return options_; }

  // Ends every running and queued request with CANCELLED carrying
  // `reason` (a forced unload); returns at once, the loop ends them before
  // its next step.
  void CancelAll(const std::string& reason);

  // Saves session `id` to the session store between two steps (waits for
  // it). NOT_FOUND for an unknown session, FAILED_PRECONDITION without a
  // store.
  absl::StatusOr<SavedSessionInfo> SaveSession(const std::string& id);

  // The model is being dropped (unloaded, reloaded, replaced): saves every
  // idle kept session now and each busy one as its request ends (before the
  // client hears of the end), so a newer copy of the model finds them on
  // disk whenever the conversation continues there. Waits for the idle ones
  // (one step at most). Requests still queued here run as usual.
  void Retire();

 private:
  // A request in the batch.
  struct Running {
    std::unique_ptr<Generation> gen;
    Session* session = nullptr;
    size_t fed = 0;  // Prompt tokens in the KV cache.
    // Whether its prompt tokens take the matrix unit (model::MatrixPrompt of
    // what it had to feed when admitted).
    bool matrix_prompt = false;
    std::optional<int32_t> next;  // Decode input, once the prompt is in.
    std::vector<float> logits;    // Of its last token.
    absl::Time stalled_since = absl::InfiniteFuture();
    bool ended = false;
  };
  // One session's part of a step.
  struct Part {
    Running* run = nullptr;
    int64_t tokens = 0;
    bool logits = false;  // The step produces its next logits.
  };

  void Loop();
  // Moves queued requests into the batch; true if any was admitted or
  // ended.
  bool Admit();
  // Ends requests that were cancelled, ran past their deadline or stalled.
  void Reap(absl::Time now);
  // Runs one step over the batch; false when no session could take part.
  bool RunStep();
  // Runs `parts` through Forward::Step and updates each session; a part
  // whose step fails is retried alone once the group has more than one.
  void Execute(std::vector<Part>& parts);
  // Applies a successful step to its sessions and samples their tokens.
  void Advance(std::vector<Part>& parts, const cache::ChunkStoreStats& before,
               const cache::ChunkStoreStats& after, double seconds);
  // Whether the session sits this step out (its client is behind).
  bool Paused(Running* run, absl::Time now);
  // Ends a request: the done event when `status` is OK, then the sink's
  // Finish; frees its session for others.
  void End(Running* run, const absl::Status& status,
           v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED);
  void RemoveEnded();
  void UpdateGauges();
  // Runs the tasks other threads queued for the loop (between steps).
  void RunTasks();
  // Saves a kept session; failures are logged.
  void SaveKept(const Session& session);
  void SaveRetired(Session& session);

  const model::Model* model_;
  cache::ChunkStore* store_;
  const ModelText* text_;
  const SchedulerOptions options_;
  const int64_t step_tokens_limit_;
  std::function<void()> on_idle_;

  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Generation>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  SchedulerStats stats_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);

  // Loop thread only.
  model::Forward forward_;
  SessionTable sessions_;
  std::vector<std::unique_ptr<Running>> running_;  // In admission order.
  bool ended_since_idle_ = false;
  bool retiring_ = false;  // Retire(): kept sessions are saved as they idle.

  std::thread thread_;  // Last: starts once everything above exists.
};

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_SCHEDULER_H_
