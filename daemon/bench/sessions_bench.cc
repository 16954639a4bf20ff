// `wasted bench --sessions N[,N...]`: concurrent generations through the
// engine's own scheduler (the daemon's code path without the RPC), one
// round per N, each round N requests submitted at once. Prints aggregate
// and per-session decode tok/s, time to first token, bytes read per step
// and per token, sessions per step, and for MoE the ideal sharing gain the
// measured routing allows.
#include "daemon/bench/sessions_bench.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "daemon/bench/memory_bandwidth.h"
#include "daemon/engine/loaded_model.h"
#include "storage/env.h"

namespace waste::bench {
namespace {

// One request's events, timed as they arrive.
class TimedSink : public engine::GenerationSink {
 public:
  explicit TimedSink(absl::Time submitted) : submitted_(submitted) {}
  bool Send(const v1::GenerateEvent& event) override {
    absl::MutexLock lock(&mu_);
    if (event.has_token() && event.token().id() >= 0 && ++tokens_ == 1) first_ = absl::Now();
    if (event.has_done()) done_ = event.done();
    return true;
  }
  void Finish(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    end_ = absl::Now();
    finished_ = true;
  }
  absl::Status Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&finished_));
    return status_;
  }
  // Valid after Wait.
  double ttft_seconds() const { return absl::ToDoubleSeconds(first_ - submitted_); }
  absl::Time first() const { return first_; }
  absl::Time end() const { return end_; }
  int tokens() const {
    absl::MutexLock lock(&mu_);
    return tokens_;
  }
  bool finished() const {
    absl::MutexLock lock(&mu_);
    return finished_;
  }
  const v1::GenerateDone& done() const { return done_; }

 private:
  const absl::Time submitted_;
  mutable absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_;
  absl::Time first_, end_;
  int tokens_ = 0;
  v1::GenerateDone done_;
};

struct Round {
  int sessions = 0;
  double wall_seconds = 0;
  double aggregate_tps = 0;    // Generated tokens of all / decode span.
  double per_session_tps = 0;  // Mean of each request's decode rate.
  double ttft_mean = 0, ttft_max = 0;
  int64_t steps = 0;
  double mean_batch = 0;
  int64_t bytes = 0;
  int64_t generated = 0;
  double ideal_moe_gain = 0;  // routed / expert acquires over the round.
};

// A prompt of about `tokens` tokens: pieces of vocabulary ids spread over
// the vocabulary, different per session.
std::string PromptText(const text::Tokenizer& tokenizer, int64_t tokens, int session) {
  std::string out;
  const int64_t n_vocab = tokenizer.vocab_size();
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t id = (i * 7919 + session * 104729 + 3) % n_vocab;
    tokenizer.AppendPiece(static_cast<text::TokenId>(id), false, &out);
  }
  return out;
}

absl::StatusOr<Round> RunRound(engine::LoadedModel& model, int sessions, int64_t prompt,
                               int64_t gen) {
  Round round;
  round.sessions = sessions;
  const v1::ModelStats before = model.Stats();
  const engine::SchedulerStats sched_before = model.SchedulerCounters();
  std::vector<std::unique_ptr<TimedSink>> sinks;
  const absl::Time start = absl::Now();
  for (int i = 0; i < sessions; ++i) {
    v1::GenerateRequest request;
    request.set_prompt(PromptText(model.tokenizer(), prompt, i));
    request.set_max_tokens(static_cast<int32_t>(gen));
    request.set_stop_at_eos(false);
    sinks.push_back(std::make_unique<TimedSink>(absl::Now()));
    RETURN_IF_ERROR(model.Submit(request, sinks.back().get()));
  }
  absl::Time first_token = absl::InfiniteFuture(), end = start;
  double tps_sum = 0, ttft_sum = 0;
  for (auto& sink : sinks) {
    RETURN_IF_ERROR(sink->Wait());
    first_token = std::min(first_token, sink->first());
    end = std::max(end, sink->end());
    round.generated += sink->tokens();
    tps_sum += sink->done().timings().decode_tokens_per_second();
    ttft_sum += sink->ttft_seconds();
    round.ttft_max = std::max(round.ttft_max, sink->ttft_seconds());
  }
  const v1::ModelStats after = model.Stats();
  const engine::SchedulerStats sched_after = model.SchedulerCounters();
  round.wall_seconds = absl::ToDoubleSeconds(end - start);
  // Decode throughput: tokens after each session's first, over the span
  // from the first token to the end.
  const double span = absl::ToDoubleSeconds(end - first_token);
  round.aggregate_tps = span > 0 ? static_cast<double>(round.generated - sessions) / span : 0;
  round.per_session_tps = tps_sum / sessions;
  round.ttft_mean = ttft_sum / sessions;
  round.steps = after.steps() - before.steps();
  round.mean_batch =
      round.steps > 0
          ? static_cast<double>(sched_after.batch_sessions - sched_before.batch_sessions) /
                static_cast<double>(round.steps)
          : 0;
  round.bytes = after.totals().bytes_read() - before.totals().bytes_read();
  const int64_t routed = sched_after.moe_routed - sched_before.moe_routed;
  const int64_t acquires = sched_after.moe_expert_acquires - sched_before.moe_expert_acquires;
  round.ideal_moe_gain = acquires > 0 ? static_cast<double>(routed) / acquires : 0;
  return round;
}

// Time to first token of a request that arrives while `others` requests
// decode (each already past its first few tokens), and of the same request
// alone. nullopt when one of the others ended (its tokens or its context
// used up) before all of them were decoding: there was no moment to arrive
// late at.
struct LateArrival {
  double alone_seconds = 0, late_seconds = 0;
};

absl::StatusOr<std::optional<LateArrival>> MeasureLateArrival(engine::LoadedModel& model,
                                                              int others, int64_t prompt,
                                                              int64_t gen) {
  LateArrival out;
  auto request = [&](int session, int64_t tokens) {
    v1::GenerateRequest r;
    r.set_prompt(PromptText(model.tokenizer(), prompt, session));
    r.set_max_tokens(static_cast<int32_t>(tokens));
    r.set_stop_at_eos(false);
    return r;
  };
  {
    TimedSink alone(absl::Now());
    RETURN_IF_ERROR(model.Submit(request(99, 2), &alone));
    RETURN_IF_ERROR(alone.Wait());
    out.alone_seconds = alone.ttft_seconds();
  }
  std::vector<std::unique_ptr<TimedSink>> sinks;
  for (int i = 0; i < others; ++i) {
    sinks.push_back(std::make_unique<TimedSink>(absl::Now()));
    RETURN_IF_ERROR(model.Submit(request(i, 4 * gen), sinks.back().get()));
  }
  // Wait until every one of them decodes.
  while (true) {
    const engine::SchedulerStats stats = model.SchedulerCounters();
    bool decoding = stats.running == others, ended = false;
    for (auto& sink : sinks) {
      decoding = decoding && sink->tokens() >= 4;
      ended = ended || sink->finished();
    }
    if (decoding) break;
    if (ended) {
      for (auto& sink : sinks) RETURN_IF_ERROR(sink->Wait());
      return std::nullopt;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  TimedSink late(absl::Now());
  RETURN_IF_ERROR(model.Submit(request(99, 2), &late));
  RETURN_IF_ERROR(late.Wait());
  out.late_seconds = late.ttft_seconds();
  for (auto& sink : sinks) RETURN_IF_ERROR(sink->Wait());
  return out;
}

}  // namespace

absl::Status BenchSessions(const PlannedModel& pm, const memory::MemoryPlan& plan,
                           const std::vector<int>& sessions, int64_t prompt, int64_t gen,
                           int threads, const ParsedArgs& args, double memory_gbps) {
  v1::ModelConfig config;
  config.set_ram_budget_bytes(static_cast<int64_t>(pm.budget_bytes));
  // The engine's VRAM tier (a CUDA device, else the CPU with a warning).
  if (pm.options.vram_budget_bytes > 0) {
    config.set_vram_budget_bytes(static_cast<int64_t>(pm.options.vram_budget_bytes));
  }
  config.set_context_length(static_cast<int32_t>(pm.input.n_ctx));
  config.set_kv_cache_type(pm.kv_type == kernels::ops::KvType::kF32 ? v1::KV_CACHE_TYPE_F32
                                                                    : v1::KV_CACHE_TYPE_F16);
  config.set_threads(threads);
  config.set_max_concurrent_requests(pm.sessions);
  config.set_max_queued_requests(0);
  if (args.Has("lookahead")) config.set_router_lookahead(true);
  if (args.Has("no-lookahead")) config.set_router_lookahead(false);
  if (args.Has("buffered")) config.set_direct_io(false);
  if (args.Has("no-repack")) config.set_repack_resident(false);
  if (args.Has("prefill-chunk")) {  // Else the engine's default.
    ASSIGN_OR_RETURN(int64_t chunk, args.GetInt("prefill-chunk", 0));
    config.set_prefill_chunk(static_cast<int32_t>(chunk));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<engine::LoadedModel> model,
                   engine::LoadedModel::Load(storage::Env::Default(), "bench", pm.path, config));
  const v1::MemoryPlan loaded_plan = model->Plan();
  if (loaded_plan.concurrent_sessions() < pm.sessions) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the budget holds KV caches for %d sessions at --ctx %d, not %d; raise --ram-budget "
        "or lower --ctx",
        loaded_plan.concurrent_sessions(), pm.input.n_ctx, pm.sessions));
  }
  // Warm-up: one short request, so the first round does not pay for
  // first-touch page faults of the pool alone.
  RETURN_IF_ERROR(RunRound(*model, 1, std::min<int64_t>(prompt, 4), 2).status());

  std::cout << absl::StrFormat(
      "model:      %s\n"
      "cpu:        %s\n"
      "mode:       %s (budget %s, %s read per token by the plan, KV caches for %d sessions)\n"
      "requests:   ~%d prompt tokens, %d generated each, greedy; memory reads %.2f GB/s\n\n",
      pm.path, MachineSummary(threads), plan.all_resident() ? "resident" : "streaming",
      FormatBytes(pm.budget_bytes), FormatBytes(loaded_plan.bytes_read_per_token()),
      loaded_plan.concurrent_sessions(), prompt, gen, memory_gbps);
  std::cout << absl::StrFormat("%8s %11s %7s %12s %10s %10s %7s %10s %12s %12s %6s%s\n", "sessions",
                               "aggregate", "gain", "per-session", "ttft mean", "ttft max", "steps",
                               "batch", "read/step", "read/token", "steal",
                               plan.sizes.moe ? "   ideal" : "");
  double base = 0;
  int64_t peak_rss = 0;
  for (int n : sessions) {
    const std::optional<HostCpuTimes> host_before = ReadHostCpuTimes();
    ASSIGN_OR_RETURN(Round r, RunRound(*model, n, prompt, gen));
    const std::optional<double> steal = StealShare(host_before, ReadHostCpuTimes());
    if (n == 1 && base == 0) base = r.aggregate_tps;
    const double gain = base > 0 ? r.aggregate_tps / base : 0;
    std::cout << absl::StrFormat(
        "%8d %7.2f t/s %6.2fx %8.2f t/s %8.0f ms %8.0f ms %7d %10.2f %12s %12s %6s", n,
        r.aggregate_tps, gain, r.per_session_tps, 1e3 * r.ttft_mean, 1e3 * r.ttft_max, r.steps,
        r.mean_batch, FormatBytes(r.steps > 0 ? r.bytes / r.steps : 0),
        FormatBytes(r.generated > 0 ? r.bytes / r.generated : 0),
        steal ? absl::StrFormat("%5.1f%%", 100 * *steal) : std::string("   n/a"));
    if (plan.sizes.moe) std::cout << absl::StrFormat(" %6.2fx", r.ideal_moe_gain);
    std::cout << "\n";
    peak_rss = std::max(peak_rss, PeakRssBytes());
  }
  const int others = std::min(3, pm.sessions - 1);
  if (others > 0) {
    ASSIGN_OR_RETURN(std::optional<LateArrival> late,
                     MeasureLateArrival(*model, others, prompt, gen));
    if (late) {
      std::cout << absl::StrFormat(
          "\nlate arrival: time to first token %.0f ms while %d others decode, %.0f ms alone "
          "(%.2fx)\n",
          1e3 * late->late_seconds, others, 1e3 * late->alone_seconds,
          late->alone_seconds > 0 ? late->late_seconds / late->alone_seconds : 0);
    } else {
      std::cout << absl::StrFormat(
          "\nlate arrival: not measured: a request ended before the %d others decoded together "
          "(each asks for 4 x --gen-tokens in a context of %d positions); raise --gen-tokens "
          "or --ctx\n",
          others, pm.input.n_ctx);
    }
  }
  std::cout << absl::StrFormat(
      "\ngain: aggregate decode over the 1-session round (run --sessions 1,... to get it)%s\n"
      "steal: the share of the machine's CPU time a hypervisor took during the round (above "
      "5%% the host's other guests slowed it)\n"
      "peak RSS:   %s (%.1f%% of the budget)\n",
      plan.sizes.moe ? "; ideal: expert choices per expert read in those steps (what sharing "
                       "the union of routed experts can give when none is cached)"
                     : "",
      FormatBytes(peak_rss), 100.0 * peak_rss / pm.budget_bytes);
  return absl::OkStatus();
}

}  // namespace waste::bench
