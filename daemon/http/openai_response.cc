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

std::string RandomId(const char* prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("%s%012x%012x", prefix, rng() & 0xffffffffffffULL,
                         rng() & 0xffffffffffffULL);
}

}  // namespace

std::string NewCompletionId(ApiKind kind) {
  return RandomId(kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-");
}

std::string NewToolCallId() { return RandomId("call_"); }

const char* FinishReasonName(v1::FinishReason reason, bool called_tools) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
    case v1::FINISH_REASON_CONTEXT_FULL:
      return "length";
    case v1::FINISH_REASON_EOS:
      return called_tools ? "tool_calls" : "stop";
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
      model_(std::move(model)),
      tools_(request.kind == ApiKind::kChat ? request.generate.chat().tools() : "") {}

void CompletionResponse::Record(const v1::GenerateEvent& event,
                                std::vector<TokenLogprob>* logprob) {
  if (event.has_started()) {
    // The reply starts inside a reasoning block the prompt opened.
    if (split_reasoning_ && event.started().reasoning_open()) {
      splitter_ = ReasoningSplitter(/*opened=*/true);
    }
    // The model writes calls of the tools offered in its own markup.
    const ToolFormat tools = ParseToolFormat(event.started().tool_format());
    if (kind_ == ApiKind::kChat && !tools_.empty() && tools != ToolFormat::kNone) {
      parse_tools_ = true;
      tool_splitter_ = ToolCallSplitter(tools, tools_);
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
    const Delta delta = Split(text_.substr(before), false);
    if (delta.empty() && logprob.empty()) return "";
    return SseEvent(Dump(Chunk(delta, logprob, nullptr, false)));
  }
  if (!event.has_done()) return "";
  std::string out;
  // What the splitter held back (a reply cut inside a message).
  const Delta rest = Split("", true);
  if (!rest.empty()) out += SseEvent(Dump(Chunk(rest, {}, nullptr, false)));
  out += SseEvent(Dump(Chunk({}, {}, FinishReasonName(finish_, !split_.calls.empty()), false)));
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

CompletionResponse::Delta CompletionResponse::Split(const std::string& added, bool last) {
  Delta delta;
  std::vector<ToolCall> calls;  // gpt-oss's, which come with its reasoning.
  if (split_reasoning_) {
    ReasoningSplitter::Parts parts = last ? splitter_.Finish() : splitter_.Add(added);
    delta.reasoning = std::move(parts.reasoning);
    delta.content = std::move(parts.content);
    calls = std::move(parts.calls);
  } else {
    delta.content = added;
  }
  if (parse_tools_) {
    ToolCallSplitter::Parts parts = tool_splitter_.Add(delta.content);
    if (last) {
      ToolCallSplitter::Parts rest = tool_splitter_.Finish();
      parts.content += rest.content;
      for (ToolCall& call : rest.calls) parts.calls.push_back(std::move(call));
    }
    delta.content = std::move(parts.content);
    for (ToolCall& call : parts.calls) calls.push_back(std::move(call));
  }
  for (ToolCall& call : calls) {
    // A call offered no tools, or cut short before its arguments closed
    // (max_tokens), is what the model said.
    if (!parse_tools_ || !Json::parse(call.arguments, nullptr, false).is_object()) {
      delta.content += call.arguments;
      continue;
    }
    if (call.id.empty()) call.id = NewToolCallId();
    delta.calls.push_back(std::move(call));
  }
  if (Parsed()) {
    split_.reasoning += delta.reasoning;
    split_.content += delta.content;
    split_.calls.insert(split_.calls.end(), delta.calls.begin(), delta.calls.end());
  }
  return delta;
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

Json CompletionResponse::ToolCalls(const std::vector<ToolCall>& calls, size_t first_index) const {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back({{"index", first_index + i},
                   {"id", calls[i].id},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  }
  return out;
}

Json CompletionResponse::Chunk(const Delta& delta, const std::vector<TokenLogprob>& logprobs,
                               const char* finish_reason, bool first) const {
  Json choice = {{"index", 0}};
  if (kind_ == ApiKind::kChat) {
    if (first) {
      choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    } else if (finish_reason != nullptr) {
      choice["delta"] = Json::object();
    } else {
      choice["delta"] = Json::object();
      if (!delta.content.empty() || (delta.reasoning.empty() && delta.calls.empty())) {
        choice["delta"]["content"] = delta.content;
      }
      if (!delta.reasoning.empty()) choice["delta"]["reasoning_content"] = delta.reasoning;
      // The calls' indices count from the first of the reply (split_ has
      // them all by now).
      if (!delta.calls.empty()) {
        choice["delta"]["tool_calls"] =
            ToolCalls(delta.calls, split_.calls.size() - delta.calls.size());
      }
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
    const std::string& content = Parsed() ? split_.content : text_;
    // A reply that only called tools has no content (null, as OpenAI's).
    choice["message"] = {
        {"role", "assistant"},
        {"content", content.empty() && !split_.calls.empty() ? Json(nullptr) : Json(content)},
        {"refusal", nullptr}};
    if (!split_.reasoning.empty()) choice["message"]["reasoning_content"] = split_.reasoning;
    if (!split_.calls.empty()) choice["message"]["tool_calls"] = ToolCalls(split_.calls, 0);
  } else {
    choice["text"] = text_;
  }
  choice["logprobs"] = logprobs_ ? Logprobs(tokens_) : Json(nullptr);
  choice["finish_reason"] = FinishReasonName(finish_, !split_.calls.empty());
  Json body = {{"id", id_},
               {"object", kind_ == ApiKind::kChat ? "chat.completion" : "text_completion"},
               {"created", created_},
               {"model", model_},
               {"choices", Json::array({std::move(choice)})},
               {"usage", Usage()}};
  return Dump(body);
}

}  // namespace waste::http
