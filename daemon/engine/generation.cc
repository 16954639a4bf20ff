// LoadedModel::Generate: the generation loop of one request — resolve the
// input tokens, reuse the session's cached prefix, prefill, then sample,
// stream and stop.
#include <random>

#include "absl/strings/str_cat.h"
#include "daemon/engine/loaded_model.h"
#include "daemon/engine/stats.h"
#include "daemon/model/forward.h"
#include "daemon/text/chat_template.h"
#include "daemon/text/detokenizer.h"
#include "daemon/text/sampler.h"
#include "daemon/text/stop_matcher.h"
#include "daemon/text/utf8.h"
#include "storage/logging.h"
#include "storage/status_macros.h"

namespace waste::engine {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

absl::StatusOr<text::SamplerConfig> SamplerConfigOf(const v1::SamplingParams& p, uint64_t seed) {
  text::SamplerConfig c;
  if (p.has_temperature()) c.temperature = p.temperature();
  if (p.has_top_k()) c.top_k = p.top_k();
  if (p.has_top_p()) c.top_p = p.top_p();
  if (p.has_min_p()) c.min_p = p.min_p();
  if (p.has_repetition_penalty()) c.repetition_penalty = p.repetition_penalty();
  if (p.has_presence_penalty()) c.presence_penalty = p.presence_penalty();
  if (p.has_frequency_penalty()) c.frequency_penalty = p.frequency_penalty();
  if (p.has_penalty_last_n()) c.penalty_last_n = p.penalty_last_n();
  c.seed = seed;
  return c;
}

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

absl::Status LoadedModel::Generate(const v1::GenerateRequest& request, const EventSink& sink,
                                   const std::atomic<bool>* cancelled) {
  const absl::Time received = absl::Now();
  // Counts this request as active until it returns, then marks the model
  // used (for keep-alive).
  ++active_;
  struct Done {
    LoadedModel* model;
    ~Done() {
      {
        absl::MutexLock lock(&model->stats_mu_);
        model->last_used_ = absl::Now();
      }
      --model->active_;
    }
  } done_guard{this};
  if (request.top_logprobs() < 0 || request.top_logprobs() > text::kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_logprobs must be in 0..", text::kMaxTopLogprobs));
  }
  if (request.max_tokens() < 0) return absl::InvalidArgumentError("max_tokens must be >= 0");
  uint64_t seed =
      request.sampling().has_seed() ? request.sampling().seed() : std::random_device{}();
  ASSIGN_OR_RETURN(text::SamplerConfig sampler_config, SamplerConfigOf(request.sampling(), seed));
  sampler_config.top_logprobs = request.top_logprobs();
  ASSIGN_OR_RETURN(text::Sampler sampler,
                   text::Sampler::Create(sampler_config, tokenizer_->vocab_size()));

  absl::MutexLock run_lock(&run_mu_);
  const absl::Time started_at = absl::Now();
  {
    absl::MutexLock lock(&stats_mu_);
    ++requests_;
  }
  auto fail = [&](absl::Status status) {
    absl::MutexLock lock(&stats_mu_);
    ++failed_requests_;
    return status;
  };

  // The session and the full token sequence it should hold.
  Session* session = nullptr;
  if (!request.session_id().empty()) {
    session = sessions_.Find(request.session_id());
    if (session == nullptr) {
      return fail(absl::NotFoundError(absl::StrCat("session '", request.session_id(),
                                                   "' does not exist (it may have been evicted)")));
    }
  }
  std::vector<int32_t> full;
  bool from_bos = false;
  if (request.has_chat()) {
    std::vector<text::ChatTurn> turns;
    for (const v1::ChatMessage& m : request.chat().messages())
      turns.push_back({m.role(), m.content()});
    std::string tmpl = gguf_->GetString("tokenizer.chat_template").value_or("");
    bool gen_prompt =
        !request.chat().has_add_generation_prompt() || request.chat().add_generation_prompt();
    std::string text = text::RenderChat(text::DetectChatFormat(tmpl), turns, gen_prompt);
    full = tokenizer_->Encode(text, /*add_special=*/true, /*parse_special=*/true);
  } else if (session != nullptr) {
    full = session->tokens;
    std::vector<int32_t> more = tokenizer_->Encode(request.prompt(), false, false);
    full.insert(full.end(), more.begin(), more.end());
  } else if (request.prompt().empty()) {
    if (tokenizer_->bos() == text::kNoToken) {
      return fail(absl::InvalidArgumentError("the prompt is empty and the model has no BOS token"));
    }
    full = {tokenizer_->bos()};
    from_bos = true;
  } else {
    full = tokenizer_->Encode(request.prompt(), /*add_special=*/true, /*parse_special=*/false);
  }
  if (full.empty()) return fail(absl::InvalidArgumentError("the prompt has no tokens"));
  if (static_cast<int64_t>(full.size()) >= context_length_) {
    return fail(absl::OutOfRangeError(absl::StrCat(
        "the prompt has ", full.size(), " tokens, which leaves no room in the context of ",
        context_length_, " tokens (set a larger context_length for the model)")));
  }
  if (session == nullptr) {
    session = sessions_.Create([&] {
      return std::make_unique<model::SequenceState>(*model_, context_length_, KvTypeFor(config_));
    });
  }
  open_sessions_.store(static_cast<int>(sessions_.size()));
  // Reuse the cached prefix; at least the last token is recomputed so its
  // logits exist.
  size_t keep = std::min(CommonPrefix(session->tokens, full), full.size() - 1);
  session->state->Truncate(static_cast<int64_t>(keep));
  session->tokens.resize(keep);

  v1::GenerateEvent event;
  v1::GenerateStarted* started = event.mutable_started();
  started->set_session_id(session->id);
  started->set_model(name_);
  started->set_prompt_tokens(static_cast<int32_t>(full.size()));
  started->set_cached_prompt_tokens(static_cast<int32_t>(keep));
  started->set_context_length(static_cast<int32_t>(context_length_));
  if (!sink(event)) return absl::CancelledError("the client went away");
  if (request.echo_prompt()) {
    for (size_t i = 0; i < full.size(); ++i) {
      event.Clear();
      event.mutable_token()->set_id(full[i]);
      event.mutable_token()->set_text(text::SanitizeUtf8(tokenizer_->Piece(full[i])));
      event.mutable_token()->set_position(static_cast<int32_t>(i));
      event.mutable_token()->set_prompt(true);
      if (!sink(event)) return absl::CancelledError("the client went away");
    }
  }

  // Prefill.
  model::Forward forward(model_.get(), store_.get(), pool_.get());
  forward.set_router_lookahead(config_.has_router_lookahead() && config_.router_lookahead());
  std::vector<float> logits(model_->hparams().n_vocab);
  const cache::ChunkStoreStats stats_at_start = store_->Stats();
  absl::Status status = forward.Run(session->state.get(),
                                    std::span<const int32_t>(full).subspan(keep), logits.data());
  if (!status.ok()) {
    session->tokens.resize(session->state->n_past());
    return fail(status);
  }
  session->tokens = full;
  for (int32_t t : full) sampler.Accept(t);
  const absl::Time prefill_done = absl::Now();

  // Decode.
  text::StreamingDetokenizer detok(*tokenizer_, false, from_bos);
  text::StopMatcher stops(std::vector<std::string>(request.stop().begin(), request.stop().end()));
  const bool stop_at_eos = !request.has_stop_at_eos() || request.stop_at_eos();
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  int32_t generated = 0;
  absl::Time first_token_at;
  cache::ChunkStoreStats step_before = store_->Stats();
  std::string piece, out;
  while (true) {
    if (cancelled != nullptr && cancelled->load()) {
      finish = v1::FINISH_REASON_CANCELLED;
      break;
    }
    text::SampleResult sample = sampler.Sample(logits);
    if (stop_at_eos && tokenizer_->IsEog(sample.token)) {
      finish = v1::FINISH_REASON_EOS;
      break;
    }
    piece.clear();
    out.clear();
    detok.Push(sample.token, &piece);
    bool stopped = stops.Push(piece, &out);
    event.Clear();
    v1::TokenEvent* token = event.mutable_token();
    token->set_id(sample.token);
    token->set_text(out);
    token->set_logprob(sample.logprob);
    token->set_position(static_cast<int32_t>(session->tokens.size()));
    for (const text::TokenLogprob& alt : sample.top) {
      v1::TokenLogprob* top = token->add_top();
      top->set_id(alt.token);
      top->set_text(text::SanitizeUtf8(tokenizer_->Piece(alt.token)));
      top->set_logprob(alt.logprob);
    }
    ++generated;
    if (generated == 1) first_token_at = absl::Now();
    if (!sink(event)) {
      finish = v1::FINISH_REASON_CANCELLED;
      break;
    }
    if (stopped) {
      finish = v1::FINISH_REASON_STOP_SEQUENCE;
      break;
    }
    if (request.max_tokens() > 0 && generated >= request.max_tokens()) {
      finish = v1::FINISH_REASON_LENGTH;
      break;
    }
    if (static_cast<int64_t>(session->tokens.size()) + 1 > context_length_) {
      finish = v1::FINISH_REASON_CONTEXT_FULL;
      break;
    }
    int32_t next = sample.token;
    status = forward.Run(session->state.get(), {&next, 1}, logits.data());
    if (!status.ok()) {
      session->tokens.resize(session->state->n_past());
      return fail(status);
    }
    session->tokens.push_back(next);
    if (request.stream_stats()) {
      cache::ChunkStoreStats now = store_->Stats();
      event.Clear();
      *event.mutable_stats() = StatsDelta(step_before, now);
      event.mutable_stats()->set_tokens(1);
      step_before = now;
      if (!sink(event)) {
        finish = v1::FINISH_REASON_CANCELLED;
        break;
      }
    }
  }
  if (finish == v1::FINISH_REASON_CANCELLED) return absl::CancelledError("generation cancelled");

  // Text still held back (an unfinished UTF-8 character, or a possible start
  // of a stop sequence that never completed) is sent as a final text-only
  // event.
  if (!stops.stopped()) {
    piece.clear();
    out.clear();
    detok.Flush(&piece);
    stops.Push(piece, &out);
    stops.Flush(&out);
    if (!out.empty()) {
      event.Clear();
      event.mutable_token()->set_id(-1);
      event.mutable_token()->set_text(out);
      event.mutable_token()->set_position(static_cast<int32_t>(session->tokens.size()));
      if (!sink(event)) return absl::CancelledError("the client went away");
    }
  }

  const absl::Time done_at = absl::Now();
  event.Clear();
  v1::GenerateDone* done = event.mutable_done();
  done->set_finish_reason(finish);
  done->set_seed(seed);
  if (stops.stopped()) done->set_stop_sequence(request.stop(stops.matched_index()));
  v1::Usage* usage = done->mutable_usage();
  usage->set_prompt_tokens(static_cast<int32_t>(full.size()));
  usage->set_cached_prompt_tokens(static_cast<int32_t>(keep));
  usage->set_completion_tokens(generated);
  v1::Timings* timings = done->mutable_timings();
  timings->set_queue_ms(Ms(started_at - received));
  timings->set_prefill_ms(Ms(prefill_done - started_at));
  if (generated > 0) timings->set_time_to_first_token_ms(Ms(first_token_at - received));
  double decode_ms = generated > 0 ? Ms(done_at - first_token_at) : 0;
  timings->set_decode_ms(decode_ms);
  double prefill_s = absl::ToDoubleSeconds(prefill_done - started_at);
  if (prefill_s > 0) timings->set_prefill_tokens_per_second((full.size() - keep) / prefill_s);
  if (generated > 1 && decode_ms > 0) {
    timings->set_decode_tokens_per_second((generated - 1) / (decode_ms / 1e3));
  }
  *done->mutable_stats() = StatsDelta(stats_at_start, store_->Stats());
  done->mutable_stats()->set_tokens(static_cast<int64_t>(full.size() - keep) + generated);
  done->mutable_stats()->set_compute_ms(Ms(done_at - started_at) - done->stats().io_wait_ms());
  {
    absl::MutexLock lock(&stats_mu_);
    tokens_ += done->stats().tokens();
    compute_ms_ += done->stats().compute_ms();
    last_decode_tps_ = timings->decode_tokens_per_second();
  }
  WLOG(INFO) << name_ << ": " << full.size() << " prompt tokens (" << keep << " cached), "
             << generated << " generated, " << v1::FinishReason_Name(finish) << ", ttft "
             << timings->time_to_first_token_ms() << " ms, decode "
             << timings->decode_tokens_per_second() << " tok/s, " << done->stats().cache_hits()
             << " hits / " << done->stats().cache_misses() << " misses, "
             << done->stats().bytes_read() << " bytes read";
  sink(event);
  // Keep what this request taught about hot experts, in case the daemon
  // does not stop cleanly.
  SaveHotlist();
  return absl::OkStatus();
}

}  // namespace waste::engine
