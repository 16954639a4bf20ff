#include "daemon/engine/generation.h"

#include <random>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/tool_call_stream.h"
#include "daemon/text/chat_template.h"
#include "daemon/text/chat_tools.h"
#include "daemon/text/utf8.h"

namespace waste::engine {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

text::SamplerConfig SamplerConfigOf(const v1::SamplingParams& p, uint64_t seed) {
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

}  // namespace

void StatsShare::Add(const cache::ChunkStoreStats& before, const cache::ChunkStoreStats& after,
                     double compute, double fraction) {
  hits += fraction * static_cast<double>(after.hits - before.hits);
  misses += fraction * static_cast<double>(after.misses - before.misses);
  prefetch_hits += fraction * static_cast<double>(after.prefetch_hits - before.prefetch_hits);
  prefetch_wasted += fraction * static_cast<double>(after.prefetch_wasted - before.prefetch_wasted);
  bytes_read += fraction * static_cast<double>(after.bytes_read - before.bytes_read);
  read_retries += fraction * static_cast<double>(after.read_retries - before.read_retries);
  io_wait_seconds += fraction * (after.io_wait_seconds - before.io_wait_seconds);
  read_busy_seconds += fraction * (after.read_busy_seconds - before.read_busy_seconds);
  compute_seconds += fraction * compute;
}

v1::EngineStats StatsShare::ToProto(const cache::ChunkStoreStats& now, int64_t tokens) const {
  v1::EngineStats out;
  out.set_tokens(tokens);
  out.set_cache_hits(std::llround(hits));
  out.set_cache_misses(std::llround(misses));
  out.set_prefetch_hits(std::llround(prefetch_hits));
  out.set_prefetch_wasted(std::llround(prefetch_wasted));
  out.set_bytes_read(std::llround(bytes_read));
  out.set_read_retries(std::llround(read_retries));
  out.set_read_gbps(read_busy_seconds > 0 ? bytes_read / read_busy_seconds / 1e9 : 0);
  out.set_io_wait_ms(io_wait_seconds * 1e3);
  out.set_compute_ms(compute_seconds * 1e3);
  out.set_pool_used_bytes(now.resident_bytes);
  out.set_pool_capacity_bytes(now.capacity_bytes);
  return out;
}

absl::StatusOr<std::unique_ptr<Generation>> Generation::Create(const v1::GenerateRequest& request,
                                                               const ModelText* model,
                                                               GenerationSink* sink,
                                                               absl::Time received,
                                                               absl::Time deadline) {
  if (request.top_logprobs() < 0 || request.top_logprobs() > text::kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_logprobs must be in 0..", text::kMaxTopLogprobs));
  }
  if (request.max_tokens() < 0) return absl::InvalidArgumentError("max_tokens must be >= 0");
  const uint64_t seed =
      request.sampling().has_seed() ? request.sampling().seed() : std::random_device{}();
  text::SamplerConfig config = SamplerConfigOf(request.sampling(), seed);
  config.top_logprobs = request.top_logprobs();
  ASSIGN_OR_RETURN(text::Sampler sampler,
                   text::Sampler::Create(config, model->tokenizer->vocab_size()));
  return std::unique_ptr<Generation>(
      new Generation(request, model, sink, std::move(sampler), seed, received, deadline));
}

Generation::Generation(const v1::GenerateRequest& request, const ModelText* model,
                       GenerationSink* sink, text::Sampler sampler, uint64_t seed,
                       absl::Time received, absl::Time deadline)
    : request_(request),
      model_(model),
      sink_(sink),
      sampler_(std::move(sampler)),
      seed_(seed),
      stops_(std::vector<std::string>(request.stop().begin(), request.stop().end())),
      stop_at_eos_(!request.has_stop_at_eos() || request.stop_at_eos()),
      received_(received),
      deadline_(deadline) {}

absl::Status Generation::Resolve(const std::vector<int32_t>* session_tokens) {
  const text::Tokenizer& tokenizer = *model_->tokenizer;
  full_.clear();
  from_bos_ = false;
  reasoning_open_ = false;
  tool_format_ = ToolFormat::kNone;
  reply_.clear();
  if (request_.has_chat()) {
    const v1::ChatMessages& chat = request_.chat();
    const text::ChatFormat format = text::DetectChatFormat(model_->chat_template);
    std::vector<text::ChatTurn> turns;
    for (const v1::ChatMessage& m : chat.messages()) {
      text::ChatTurn& turn = turns.emplace_back();
      turn.role = m.role();
      turn.content = m.content();
      turn.tool_call_id = m.tool_call_id();
      for (const v1::ToolCall& c : m.tool_calls()) {
        turn.tool_calls.push_back({c.id(), c.name(), c.arguments()});
        RETURN_IF_ERROR(text::CheckToolCall(turn.tool_calls.back()));
      }
    }
    text::ChatOptions options;
    const ToolFormat tool_format = text::ChatToolFormat(format);
    if (!chat.tools().empty()) {
      RETURN_IF_ERROR(text::CheckTools(chat.tools()));
      options.tools = chat.tools();
      tool_format_ = tool_format;
    }
    const bool calls =
        absl::c_any_of(turns, [](const text::ChatTurn& t) { return !t.tool_calls.empty(); });
    if ((!options.tools.empty() || calls) && tool_format == ToolFormat::kNone) {
      return absl::InvalidArgumentError(
          absl::StrCat("tools: this model's chat template (", text::ChatFormatName(format),
                       ") has no tool calling that waste knows (Qwen's, GLM-4.5's, "
                       "Kimi-K2's, gpt-oss's, DeepSeek-V3.1's, Llama 3.1's, Mistral 7B v0.3's and "
                       "Mistral Nemo's "
                       "have)"));
    }
    if (format == text::ChatFormat::kLlama31) {
      if (absl::c_any_of(turns, [](const text::ChatTurn& t) { return t.tool_calls.size() > 1; })) {
        return absl::InvalidArgumentError(
            "tool_calls: Llama 3's chat template takes one tool call per assistant message");
      }
      // Its "Today Date": Llama 3.2's template asks for today's, 3.1's and
      // 3.3's write a fixed one.
      if (!absl::StrContains(model_->chat_template, "strftime_now")) options.date = "2024-07-26";
    }
    // Mistral Small 3's: the system message it writes when there is none.
    if (format == text::ChatFormat::kMistralV7) {
      options.default_system = text::DefaultSystemMessage(model_->chat_template);
    }
    options.add_generation_prompt =
        !chat.has_add_generation_prompt() || chat.add_generation_prompt();
    // As a template's thinking switch, where it has one.
    if (chat.has_thinking() && text::HasThinkingSwitch(model_->chat_template)) {
      options.thinking = chat.thinking();
    }
    const std::string& effort = chat.reasoning_effort();
    if (!effort.empty() && effort != "low" && effort != "medium" && effort != "high") {
      return absl::InvalidArgumentError(
          absl::StrCat("reasoning_effort '", effort, "' is not one of low, medium, high"));
    }
    options.reasoning_effort = effort;
    std::string rendered = text::RenderChat(format, turns, options);
    full_ = tokenizer.EncodeChat(rendered);
    reasoning_open_ = text::PromptOpensReasoning(rendered);
  } else if (session_tokens != nullptr) {
    full_ = *session_tokens;
    std::vector<int32_t> more = tokenizer.Encode(request_.prompt(), false, false);
    full_.insert(full_.end(), more.begin(), more.end());
  } else if (request_.prompt().empty()) {
    if (tokenizer.bos() == text::kNoToken) {
      return absl::InvalidArgumentError("the prompt is empty and the model has no BOS token");
    }
    full_ = {tokenizer.bos()};
    from_bos_ = true;
  } else {
    full_ = tokenizer.Encode(request_.prompt(), /*add_special=*/true, /*parse_special=*/false);
  }
  if (full_.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  if (static_cast<int64_t>(full_.size()) >= model_->context_length) {
    return absl::OutOfRangeError(absl::StrCat(
        "the prompt has ", full_.size(), " tokens, which leaves no room in the context of ",
        model_->context_length, " tokens (set a larger context_length for the model)"));
  }
  detok_.emplace(tokenizer, false, from_bos_);
  return absl::OkStatus();
}

bool Generation::Start(const std::string& session_id, size_t cached, absl::Time admitted) {
  cached_ = cached;
  admitted_ = admitted;
  for (int32_t t : full_) sampler_.Accept(t);
  event_.Clear();
  v1::GenerateStarted* started = event_.mutable_started();
  started->set_session_id(session_id);
  started->set_model(model_->model_name);
  started->set_prompt_tokens(static_cast<int32_t>(full_.size()));
  started->set_cached_prompt_tokens(static_cast<int32_t>(cached));
  started->set_context_length(static_cast<int32_t>(model_->context_length));
  started->set_reasoning_open(reasoning_open_);
  started->set_tool_format(ToolFormatName(tool_format_));
  if (!sink_->Send(event_)) return false;
  if (request_.echo_prompt()) {
    for (size_t i = 0; i < full_.size(); ++i) {
      event_.Clear();
      v1::TokenEvent* token = event_.mutable_token();
      token->set_id(full_[i]);
      token->set_text(text::SanitizeUtf8(model_->tokenizer->Piece(full_[i])));
      token->set_position(static_cast<int32_t>(i));
      token->set_prompt(true);
      if (!sink_->Send(event_)) return false;
    }
  }
  return true;
}

void Generation::AddStep(const cache::ChunkStoreStats& before, const cache::ChunkStoreStats& after,
                         double compute_seconds, int64_t tokens, int64_t step_tokens,
                         int batch_size) {
  const double fraction =
      step_tokens > 0 ? static_cast<double>(tokens) / static_cast<double>(step_tokens) : 0;
  share_.Add(before, after, compute_seconds, fraction);
  last_step_ = StatsShare();
  last_step_.Add(before, after, compute_seconds, fraction);
  tokens_in_steps_ += tokens;
  ++steps_;
  batch_size_sum_ += batch_size;
}

Generation::Next Generation::OnLogits(const float* logits, int64_t n_vocab, int64_t session_length,
                                      absl::Time now) {
  const text::Tokenizer& tokenizer = *model_->tokenizer;
  text::SampleResult sample = sampler_.Sample(absl::Span<const float>(logits, n_vocab));
  if (stop_at_eos_ && tokenizer.IsEog(sample.token)) return {std::nullopt, v1::FINISH_REASON_EOS};
  piece_.clear();
  out_.clear();
  detok_->Push(sample.token, &piece_);
  const bool stopped = stops_.Push(piece_, &out_);
  event_.Clear();
  v1::TokenEvent* token = event_.mutable_token();
  token->set_id(sample.token);
  token->set_text(out_);
  if (tool_format_ != ToolFormat::kNone) reply_ += out_;
  token->set_logprob(sample.logprob);
  token->set_position(static_cast<int32_t>(session_length));
  for (const text::TokenLogprob& alt : sample.top) {
    v1::TokenLogprob* top = token->add_top();
    top->set_id(alt.token);
    top->set_text(text::SanitizeUtf8(tokenizer.Piece(alt.token)));
    top->set_logprob(alt.logprob);
  }
  if (++generated_ == 1) first_token_at_ = now;
  if (!sink_->Send(event_)) return {std::nullopt, v1::FINISH_REASON_CANCELLED};
  if (request_.stream_stats()) {
    event_.Clear();
    *event_.mutable_stats() = last_step_.ToProto(cache::ChunkStoreStats{}, 1);
    if (!sink_->Send(event_)) return {std::nullopt, v1::FINISH_REASON_CANCELLED};
  }
  if (stopped) return {std::nullopt, v1::FINISH_REASON_STOP_SEQUENCE};
  if (request_.max_tokens() > 0 && generated_ >= request_.max_tokens()) {
    return {std::nullopt, v1::FINISH_REASON_LENGTH};
  }
  if (session_length + 1 > model_->context_length) {
    return {std::nullopt, v1::FINISH_REASON_CONTEXT_FULL};
  }
  return {sample.token, v1::FINISH_REASON_UNSPECIFIED};
}

void Generation::Finish(v1::FinishReason finish, const cache::ChunkStoreStats& now_stats,
                        absl::Time now) {
  // Text still held back (an unfinished UTF-8 character, or a possible start
  // of a stop sequence that never completed) goes out as a final text-only
  // event.
  if (!stops_.stopped()) {
    piece_.clear();
    out_.clear();
    detok_->Flush(&piece_);
    stops_.Push(piece_, &out_);
    stops_.Flush(&out_);
    if (!out_.empty()) {
      if (tool_format_ != ToolFormat::kNone) reply_ += out_;
      event_.Clear();
      event_.mutable_token()->set_id(-1);
      event_.mutable_token()->set_text(out_);
      event_.mutable_token()->set_position(
          static_cast<int32_t>(full_.size() + std::max(0, generated_ - 1)));
      sink_->Send(event_);
    }
  }
  if (prefill_done_ == absl::Time()) prefill_done_ = now;
  event_.Clear();
  v1::GenerateDone* done = event_.mutable_done();
  done->set_finish_reason(finish);
  done->set_seed(seed_);
  if (stops_.stopped()) done->set_stop_sequence(request_.stop(stops_.matched_index()));
  v1::Usage* usage = done->mutable_usage();
  usage->set_prompt_tokens(static_cast<int32_t>(full_.size()));
  usage->set_cached_prompt_tokens(static_cast<int32_t>(cached_));
  usage->set_completion_tokens(generated_);
  v1::Timings* timings = done->mutable_timings();
  timings->set_queue_ms(Ms(admitted_ - received_));
  timings->set_prefill_ms(Ms(prefill_done_ - admitted_));
  if (generated_ > 0) timings->set_time_to_first_token_ms(Ms(first_token_at_ - received_));
  const double decode_ms = generated_ > 0 ? Ms(now - first_token_at_) : 0;
  timings->set_decode_ms(decode_ms);
  const double prefill_s = absl::ToDoubleSeconds(prefill_done_ - admitted_);
  if (prefill_s > 0) {
    timings->set_prefill_tokens_per_second(static_cast<double>(full_.size() - cached_) / prefill_s);
  }
  if (generated_ > 1 && decode_ms > 0) {
    timings->set_decode_tokens_per_second((generated_ - 1) / (decode_ms / 1e3));
  }
  decode_tps_ = timings->decode_tokens_per_second();
  *done->mutable_stats() = share_.ToProto(now_stats, tokens_computed());
  done->set_steps(steps_);
  const double mean_batch =
      steps_ > 0 ? static_cast<double>(batch_size_sum_) / static_cast<double>(steps_) : 0;
  done->set_mean_batch_size(mean_batch);
  if (tool_format_ != ToolFormat::kNone) {
    for (const ToolCall& call :
         ReplyToolCalls(reply_, reasoning_open_, tool_format_, request_.chat().tools())) {
      v1::ToolCall* out = done->add_tool_calls();
      out->set_id(call.id);
      out->set_name(call.name);
      out->set_arguments(call.arguments);
    }
  }
  WLOG(INFO) << model_->model_name << ": " << full_.size() << " prompt tokens (" << cached_
             << " cached), " << generated_ << " generated, " << v1::FinishReason_Name(finish)
             << ", queued " << absl::StrFormat("%.1f", timings->queue_ms()) << " ms, ttft "
             << absl::StrFormat("%.1f", timings->time_to_first_token_ms()) << " ms, decode "
             << absl::StrFormat("%.2f", timings->decode_tokens_per_second()) << " tok/s, " << steps_
             << " steps with " << absl::StrFormat("%.2f", mean_batch) << " sessions on average, "
             << done->stats().cache_hits() << " hits / " << done->stats().cache_misses()
             << " misses, " << done->stats().bytes_read() << " bytes read (its share)";
  sink_->Send(event_);
}

}  // namespace waste::engine
