// OpenAI-compatible responses built from a generation's events: the
// streamed chunks (chat.completion.chunk / text_completion objects as
// server-sent events, then `data: [DONE]`) and the one-piece response
// (chat.completion / text_completion). Knows JSON and OpenAI's shapes,
// nothing of sockets. A chat reply's reasoning (gpt-oss's analysis channel,
// a <think> block) comes without its markup as "reasoning_content", as
// llama.cpp's server gives it; when the request offered tools, the calls
// the reply makes come as "tool_calls" (finish_reason "tool_calls"), each
// streamed whole as soon as the model closes it.
//
// Not thread-safe: one per request, fed in event order.
#ifndef WASTE_DAEMON_HTTP_OPENAI_RESPONSE_H_
#define WASTE_DAEMON_HTTP_OPENAI_RESPONSE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/reasoning_stream.h"
#include "common/tool_call_stream.h"
#include "daemon/http/api_error.h"
#include "daemon/http/openai_request.h"
#include "waste/v1/generate.pb.h"

namespace waste::http {

// "chatcmpl-" or "cmpl-" and 24 random hex digits.
std::string NewCompletionId(ApiKind kind);

// "call_" and 24 random hex digits: a tool call the model did not name.
std::string NewToolCallId();

// OpenAI's finish_reason: "stop" (end of text or a stop sequence) or
// "length" (max_tokens or the context window); "tool_calls" when a reply
// that called tools ended by itself.
const char* FinishReasonName(v1::FinishReason reason, bool called_tools = false);

class CompletionResponse {
 public:
  // `created` is Unix seconds; `model` names the model until the started
  // event says which one serves the request.
  CompletionResponse(const CompletionRequest& request, std::string id, int64_t created,
                     std::string model);

  // Streaming: the server-sent events an engine event produces (may be
  // empty). After the done event this includes the final chunk, the usage
  // chunk (stream_options.include_usage) and `data: [DONE]`.
  std::string StreamEvent(const v1::GenerateEvent& event);
  // Streaming: an error after the stream began, as an event carrying
  // OpenAI's error object (which OpenAI's clients raise).
  static std::string StreamError(const ApiError& error);

  // Non-streaming: takes in an event; Body() is the response once the done
  // event was added.
  void Add(const v1::GenerateEvent& event);
  std::string Body() const;

  bool done() const { return done_; }

 private:
  struct TokenLogprob {
    std::string text;
    size_t offset = 0;  // Where the token's text starts in the output.
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;
  };

  // What a piece of a chat reply adds: reasoning, content, tool calls.
  struct Delta {
    std::string reasoning, content;
    std::vector<ToolCall> calls;
    bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
  };

  // Takes in a started, token or done event; a token's logprob entry (if
  // reported) goes to *logprob.
  void Record(const v1::GenerateEvent& event, std::vector<TokenLogprob>* logprob);
  // The text a token added, split into reasoning, content and tool calls
  // (reasoning in harmony or a <think> block: the splitter decides at the
  // reply's start; calls where the request offered tools). Calls get ids.
  Delta Split(const std::string& added, bool last);
  // Whether a chat reply's content is what the splitters handed back (else
  // it is text_ itself: no second copy).
  bool Parsed() const { return splitter_.split() || parse_tools_; }
  // One streamed chunk: a delta, or the role (first), or the finish reason.
  nlohmann::json Chunk(const Delta& delta, const std::vector<TokenLogprob>& logprobs,
                       const char* finish_reason, bool first) const;
  nlohmann::json ToolCalls(const std::vector<ToolCall>& calls, size_t first_index) const;
  nlohmann::json Logprobs(const std::vector<TokenLogprob>& tokens) const;
  nlohmann::json Usage() const;

  ApiKind kind_;
  bool logprobs_;
  bool include_usage_;
  bool split_reasoning_;  // Chat replies through splitter_ (else text as it came).
  std::string id_;
  int64_t created_;
  std::string model_;
  std::string text_;  // Everything generated so far.
  // Chat replies: the splitters, and what they handed back so far (the
  // answer when Parsed(); any other reply is text_).
  ReasoningSplitter splitter_;
  std::string tools_;         // The request's tools (JSON), if any.
  bool parse_tools_ = false;  // The model has a tool format and was offered tools.
  ToolCallSplitter tool_splitter_{ToolFormat::kNone, ""};
  Delta split_;
  std::vector<TokenLogprob> tokens_;  // Non-streaming: every token's logprob.
  int32_t prompt_tokens_ = 0;
  int32_t cached_prompt_tokens_ = 0;
  int32_t completion_tokens_ = 0;
  v1::FinishReason finish_ = v1::FINISH_REASON_UNSPECIFIED;
  bool done_ = false;
};

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_OPENAI_RESPONSE_H_
