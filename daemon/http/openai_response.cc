#include "daemon/http/openai_response.h"

#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/str_format.h"
#include "daemon/http/sse.h"

namespace waste::http {
namespace {

using Json = nlohmann::json;

// Engine text is valid UTF-8; model names come from file names and might
// not be, so invalid bytes are replaced rather than thrown on.
std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json Bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

std::string NewCompletionId(ApiKind kind) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("%s%012x%012x", kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-",
                         rng() & 0xffffffffffffULL, rng() & 0xffffffffffffULL);
}

const char* FinishReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
    case v1::FINISH_REASON_CONTEXT_FULL:
      return "length";
    default:
      return "stop";
  }
}

CompletionResponse::CompletionResponse(const CompletionRequest& request, std::string id,
                                       int64_t created, std::string model)
    : kind_(request.kind),
      logprobs_(request.logprobs),
      include_usage_(request.stream && request.include_usage),
      split_reasoning_(request.kind == ApiKind::kChat && request.split_reasoning),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)) {}

void CompletionResponse::Record(const v1::GenerateEvent& event,
                                std::vector<TokenLogprob>* logprob) {
  if (event.has_started()) {
    // The reply starts inside a reasoning block the prompt opened.
    if (split_reasoning_ && event.started().reasoning_open()) {
      splitter_ = ReasoningSplitter(/*opened=*/true);
    }
    model_ = event.started().model();
    prompt_tokens_ = event.started().prompt_tokens();
    cached_prompt_tokens_ = event.started().cached_prompt_tokens();
  } else if (event.has_token() && !event.token().prompt()) {
    const v1::TokenEvent& token = event.token();
    // id -1 is text held back until the end (no token of its own).
    if (logprobs_ && token.id() >= 0) {
      TokenLogprob entry{.text = token.text(), .offset = text_.size(), .logprob = token.logprob()};
      for (const v1::TokenLogprob& alt : token.top())
        entry.top.emplace_back(alt.text(), alt.logprob());
      logprob->push_back(std::move(entry));
    }
    text_ += token.text();
  } else if (event.has_done()) {
    finish_ = event.done().finish_reason();
    prompt_tokens_ = event.done().usage().prompt_tokens();
    cached_prompt_tokens_ = event.done().usage().cached_prompt_tokens();
    completion_tokens_ = event.done().usage().completion_tokens();
    done_ = true;
  }
}

std::string CompletionResponse::StreamEvent(const v1::GenerateEvent& event) {
  std::vector<TokenLogprob> logprob;
  const size_t before = text_.size();
  Record(event, &logprob);
  if (event.has_started()) {
    // Chat streams open with the assistant's role, as OpenAI's do.
    return kind_ == ApiKind::kChat ? SseEvent(Dump(Chunk({}, {}, nullptr, true))) : "";
  }
  if (event.has_token()) {
    const ReasoningSplitter::Parts delta = Split(text_.substr(before), false);
    if (delta.content.empty() && delta.reasoning.empty() && logprob.empty()) return "";
    return SseEvent(Dump(Chunk(delta, logprob, nullptr, false)));
  }
  if (!event.has_done()) return "";
  std::string out;
  // What the splitter held back (a reply cut inside a message).
  const ReasoningSplitter::Parts rest = Split("", true);
  if (!rest.content.empty() || !rest.reasoning.empty()) {
    out += SseEvent(Dump(Chunk(rest, {}, nullptr, false)));
  }
  out += SseEvent(Dump(Chunk({}, {}, FinishReasonName(finish_), false)));
  if (include_usage_) {
    // OpenAI's last chunk before [DONE]: no choices, the whole usage.
    Json usage_chunk = Chunk({}, {}, nullptr, false);
    usage_chunk["choices"] = Json::array();
    usage_chunk["usage"] = Usage();
    out += SseEvent(Dump(usage_chunk));
  }
  out += kSseDone;
  return out;
}

std::string CompletionResponse::StreamError(const ApiError& error) {
  return SseEvent(error.ToJson());
}

void CompletionResponse::Add(const v1::GenerateEvent& event) {
  const size_t before = text_.size();
  Record(event, &tokens_);
  if (event.has_token()) Split(text_.substr(before), false);
  if (event.has_done()) Split("", true);
}

ReasoningSplitter::Parts CompletionResponse::Split(const std::string& added, bool last) {
  ReasoningSplitter::Parts parts;
  if (!split_reasoning_) {
    parts.content = added;
    return parts;
  }
  parts = last ? splitter_.Finish() : splitter_.Add(added);
  if (splitter_.split()) {  // Else the answer is text_ itself: no second copy.
    split_.reasoning += parts.reasoning;
    split_.content += parts.content;
  }
  return parts;
}

Json CompletionResponse::Logprobs(const std::vector<TokenLogprob>& tokens) const {
  if (kind_ == ApiKind::kChat) {
    Json content = Json::array();
    for (const TokenLogprob& t : tokens) {
      Json top = Json::array();
      for (const auto& [text, logprob] : t.top) {
        top.push_back({{"token", text}, {"logprob", logprob}, {"bytes", Bytes(text)}});
      }
      content.push_back({{"token", t.text},
                         {"logprob", t.logprob},
                         {"bytes", Bytes(t.text)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  // The legacy completions shape: parallel arrays.
  Json texts = Json::array(), logprobs = Json::array(), tops = Json::array(),
       offsets = Json::array();
  for (const TokenLogprob& t : tokens) {
    texts.push_back(t.text);
    logprobs.push_back(t.logprob);
    Json top = Json::object();
    for (const auto& [text, logprob] : t.top) top[text] = logprob;
    tops.push_back(std::move(top));
    offsets.push_back(t.offset);
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

Json CompletionResponse::Usage() const {
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens_},
          {"total_tokens", prompt_tokens_ + completion_tokens_},
          {"prompt_tokens_details", {{"cached_tokens", cached_prompt_tokens_}}}};
}

Json CompletionResponse::Chunk(const ReasoningSplitter::Parts& delta,
                               const std::vector<TokenLogprob>& logprobs, const char* finish_reason,
                               bool first) const {
  Json choice = {{"index", 0}};
  if (kind_ == ApiKind::kChat) {
    if (first) {
      choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    } else if (finish_reason != nullptr) {
      choice["delta"] = Json::object();
    } else if (!delta.reasoning.empty() && delta.content.empty()) {
      choice["delta"] = {{"reasoning_content", delta.reasoning}};
    } else {
      choice["delta"] = {{"content", delta.content}};
      if (!delta.reasoning.empty()) choice["delta"]["reasoning_content"] = delta.reasoning;
    }
  } else {
    choice["text"] = delta.content;
  }
  choice["logprobs"] = logprobs_ && !logprobs.empty() ? Logprobs(logprobs) : Json(nullptr);
  choice["finish_reason"] = finish_reason != nullptr ? Json(finish_reason) : Json(nullptr);
  Json chunk = {{"id", id_},
                {"object", kind_ == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", Json::array({std::move(choice)})}};
  // With include_usage every chunk carries "usage": null but the last.
  if (include_usage_) chunk["usage"] = nullptr;
  return chunk;
}

std::string CompletionResponse::Body() const {
  Json choice = {{"index", 0}};
  if (kind_ == ApiKind::kChat) {
    const std::string& content = splitter_.split() ? split_.content : text_;
    choice["message"] = {{"role", "assistant"}, {"content", content}, {"refusal", nullptr}};
    if (!split_.reasoning.empty()) choice["message"]["reasoning_content"] = split_.reasoning;
  } else {
    choice["text"] = text_;
  }
  choice["logprobs"] = logprobs_ ? Logprobs(tokens_) : Json(nullptr);
  choice["finish_reason"] = FinishReasonName(finish_);
  Json body = {{"id", id_},
               {"object", kind_ == ApiKind::kChat ? "chat.completion" : "text_completion"},
               {"created", created_},
               {"model", model_},
               {"choices", Json::array({std::move(choice)})},
               {"usage", Usage()}};
  return Dump(body);
}

}  // namespace waste::http
