// One Generate request as the scheduler runs it: the request's text side
// (its tokens, sampler, streaming detokenizer and stop sequences), the
// events it sends, and its share of the steps it took part in. The
// scheduler (scheduler.h) owns the model side: sessions, KV caches and the
// steps themselves.
//
// Life of a generation: Create (checks the fields, on the submitting
// thread) -> Resolve (the tokens its session should hold: at submission
// for a request without a session, whose tokens choose the KV cache it
// reuses; at admission for one continuing a session) ->
// Start (the started event) -> prompt tokens fed in steps -> OnLogits after
// each step that produced its logits (samples, sends the token, says whether
// to go on) -> Finish (the done event) or the scheduler ends it with an
// error.
//
// Not thread-safe: after Create every call comes from the scheduler thread.
#ifndef WASTE_DAEMON_ENGINE_GENERATION_H_
#define WASTE_DAEMON_ENGINE_GENERATION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tool_call.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/text/detokenizer.h"
#include "daemon/text/sampler.h"
#include "daemon/text/stop_matcher.h"
#include "daemon/text/tokenizer.h"
#include "waste/v1/generate.pb.h"

namespace waste::engine {

// Receives one request's events, on the scheduler's thread. Implementations
// must not block: they queue the event for their transport.
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  // Queues an event for the client. False: the client is gone (the
  // scheduler then cancels the request).
  virtual bool Send(const v1::GenerateEvent& event) = 0;
  // Events queued and not yet taken by the client. Above the scheduler's
  // limit the request pauses (skips steps) until the client catches up.
  virtual int64_t Backlog() const { return 0; }
  // The client cancelled; may change from any thread.
  virtual bool Cancelled() const { return false; }
  // Called exactly once, last: OK after the done event, else the error that
  // ended the request. The scheduler never touches the sink afterwards.
  virtual void Finish(const absl::Status& status) = 0;
};

// What a generation needs of its model besides the weights. Borrowed.
struct ModelText {
  std::string model_name;
  const text::Tokenizer* tokenizer = nullptr;
  std::string chat_template;  // tokenizer.chat_template, may be empty.
  int64_t context_length = 0;
};

// A share of the weight store's counters (fractions of a step's counters).
struct StatsShare {
  double hits = 0, misses = 0, prefetch_hits = 0, prefetch_wasted = 0, bytes_read = 0;
  double read_retries = 0, io_wait_seconds = 0, read_busy_seconds = 0, compute_seconds = 0;

  // Adds `fraction` of the counters between `before` and `after`, and of a
  // step's compute time.
  void Add(const cache::ChunkStoreStats& before, const cache::ChunkStoreStats& after,
           double compute_seconds, double fraction);
  // As the API's EngineStats, gauges from `now`.
  v1::EngineStats ToProto(const cache::ChunkStoreStats& now, int64_t tokens) const;
};

class Generation {
 public:
  // Checks the request's fields (top_logprobs, max_tokens, sampling) and
  // builds its sampler. `sink` must outlive the generation's Finish call.
  static absl::StatusOr<std::unique_ptr<Generation>> Create(const v1::GenerateRequest& request,
                                                            const ModelText* model,
                                                            GenerationSink* sink,
                                                            absl::Time received,
                                                            absl::Time deadline);

  const v1::GenerateRequest& request() const { return request_; }
  GenerationSink* sink() const { return sink_; }
  absl::Time received() const { return received_; }
  absl::Time deadline() const { return deadline_; }

  // The full token sequence the session should hold once the prompt is in:
  // chat messages through the template, else the session's tokens plus the
  // new prompt, else the prompt (or BOS alone). `session_tokens` is null for
  // a fresh session. Errors: empty prompt without BOS, a prompt that leaves
  // no room in the context.
  absl::Status Resolve(const std::vector<int32_t>* session_tokens);
  const std::vector<int32_t>& tokens() const { return full_; }

  // Sends the started event (and the echoed prompt). `cached` prompt tokens
  // are already in the session's KV cache. False: the client is gone.
  bool Start(const std::string& session_id, size_t cached, absl::Time admitted);

  // The prompt is in: the step that finished it produced `logits`.
  void Prefilled(absl::Time now) { prefill_done_ = now; }

  // What to do after a token was sampled.
  struct Next {
    std::optional<int32_t> token;  // Feed this token next; unset: finished.
    v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  };
  // Samples from the logits of the session's last token, sends the token
  // event and decides whether to go on. `session_length` is the number of
  // tokens in the session's KV cache.
  Next OnLogits(const float* logits, int64_t n_vocab, int64_t session_length, absl::Time now);

  // Records this request's share of one step: `tokens` of the step's
  // `step_tokens`, in a batch of `batch_size` sessions. Call it before
  // OnLogits: with stream_stats, the token event is followed by a stats
  // event with the share of the step that produced it.
  void AddStep(const cache::ChunkStoreStats& before, const cache::ChunkStoreStats& after,
               double compute_seconds, int64_t tokens, int64_t step_tokens, int batch_size);

  // Sends the final text and the done event, and logs the request's line.
  // `now_stats` gives the pool gauges.
  void Finish(v1::FinishReason finish, const cache::ChunkStoreStats& now_stats, absl::Time now);

  // Tokens this request accounts for (prompt tokens not cached + generated
  // ones), its share of its steps' compute time, and its decode rate (set
  // by Finish).
  int64_t tokens_computed() const {
    return static_cast<int64_t>(full_.size() - cached_) + generated_;
  }
  double compute_seconds() const { return share_.compute_seconds; }
  double decode_tokens_per_second() const { return decode_tps_; }
  int32_t generated() const { return generated_; }

 private:
  Generation(const v1::GenerateRequest& request, const ModelText* model, GenerationSink* sink,
             text::Sampler sampler, uint64_t seed, absl::Time received, absl::Time deadline);

  v1::GenerateRequest request_;
  const ModelText* model_;
  GenerationSink* sink_;
  text::Sampler sampler_;
  uint64_t seed_;
  std::optional<text::StreamingDetokenizer> detok_;  // Made by Resolve.
  text::StopMatcher stops_;
  bool from_bos_ = false;
  bool reasoning_open_ = false;                 // The chat prompt ends inside a <think> block.
  ToolFormat tool_format_ = ToolFormat::kNone;  // How the reply calls the tools offered.
  std::string reply_;                           // The reply's text, kept where tools were offered.
  bool stop_at_eos_ = true;

  std::vector<int32_t> full_;
  size_t cached_ = 0;
  int32_t generated_ = 0;
  absl::Time received_, deadline_, admitted_, prefill_done_, first_token_at_;

  StatsShare share_;
  StatsShare last_step_;  // For stream_stats.
  int64_t tokens_in_steps_ = 0;
  int steps_ = 0;
  int64_t batch_size_sum_ = 0;
  double decode_tps_ = 0;

  v1::GenerateEvent event_;  // Reused for every event.
  std::string piece_, out_;
};

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_GENERATION_H_
