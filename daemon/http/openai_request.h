// OpenAI-compatible request bodies (POST /v1/chat/completions and
// /v1/completions) parsed and checked into the engine's GenerateRequest.
// Every field either maps onto the engine, is ignored because OpenAI
// clients send it by default and it does not change what is generated
// (user, store, metadata, service_tier, parallel_tool_calls), or is refused
// with a 400 that names it (n > 1, tool_choice "required" or a named
// function, logit_bias, echo, suffix, best_of > 1, non-text
// response_format, and any field this server does not know). Tools, and
// the calls and results of earlier turns, go to the model's chat template
// (the engine refuses them for a template without tool calling).
//
// Defaults follow OpenAI's, not the gRPC API's: temperature 1 when unset,
// and /v1/completions generates 16 tokens when max_tokens is unset. Every
// request has cache_prompt (llama.cpp's extension; false turns it off): it
// starts from the KV cache of an earlier request sharing its prefix.
#ifndef WASTE_DAEMON_HTTP_OPENAI_REQUEST_H_
#define WASTE_DAEMON_HTTP_OPENAI_REQUEST_H_

#include "absl/strings/string_view.h"
#include "daemon/http/api_error.h"
#include "waste/v1/generate.pb.h"

namespace waste::http {

enum class ApiKind {
  kChat,        // /v1/chat/completions: messages through the chat template.
  kCompletion,  // /v1/completions: a raw prompt.
};

// The most stop sequences a request may carry.
inline constexpr int kMaxStopSequences = 16;
// OpenAI's default max_tokens for /v1/completions.
inline constexpr int kDefaultCompletionMaxTokens = 16;
// JSON nested deeper than this is refused before parsing.
inline constexpr int kMaxJsonDepth = 32;

struct CompletionRequest {
  ApiKind kind = ApiKind::kChat;
  // What the engine runs: model ("" = the daemon's default), prompt or chat
  // messages, max_tokens, sampling, stop, top_logprobs.
  v1::GenerateRequest generate;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage.
  bool logprobs = false;       // Report each token's logprob.
  // Chat: split a reply's reasoning into reasoning_content (llama.cpp's
  // reasoning_format "auto"/"deepseek", the default); false ("none"): the
  // reply's text as it came, <think> tags and harmony markup included.
  bool split_reasoning = true;
};

// Parses `body`. On failure returns false with a 400 in *error naming the
// field (`param`).
bool ParseCompletionRequest(ApiKind kind, absl::string_view body, CompletionRequest* request,
                            ApiError* error);

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_OPENAI_REQUEST_H_
