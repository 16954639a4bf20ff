#include "daemon/http/openai_response.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "daemon/http/sse.h"
#include "gtest/gtest.h"

namespace waste::http {
namespace {

using Json = nlohmann::json;

v1::GenerateEvent Started(int prompt_tokens, bool reasoning_open = false,
                          const std::string& tool_format = "") {
  v1::GenerateEvent e;
  e.mutable_started()->set_model("stories260K");
  e.mutable_started()->set_prompt_tokens(prompt_tokens);
  e.mutable_started()->set_reasoning_open(reasoning_open);
  e.mutable_started()->set_tool_format(tool_format);
  return e;
}

v1::GenerateEvent Token(int id, const std::string& text, float logprob = -0.5f) {
  v1::GenerateEvent e;
  e.mutable_token()->set_id(id);
  e.mutable_token()->set_text(text);
  e.mutable_token()->set_logprob(logprob);
  v1::TokenLogprob* top = e.mutable_token()->add_top();
  top->set_id(id);
  top->set_text(text);
  top->set_logprob(logprob);
  return e;
}

v1::GenerateEvent Done(v1::FinishReason reason, int prompt, int completion) {
  v1::GenerateEvent e;
  e.mutable_done()->set_finish_reason(reason);
  e.mutable_done()->mutable_usage()->set_prompt_tokens(prompt);
  e.mutable_done()->mutable_usage()->set_completion_tokens(completion);
  return e;
}

// The JSON payloads of a stream, and whether it ended with [DONE].
std::vector<Json> Payloads(const std::string& stream, bool* done) {
  SseParser parser;
  parser.Feed(stream);
  std::vector<Json> out;
  *done = false;
  for (const std::string& data : parser.TakeEvents()) {
    EXPECT_FALSE(*done) << "events after [DONE]";
    if (data == "[DONE]") {
      *done = true;
      continue;
    }
    out.push_back(Json::parse(data));
  }
  return out;
}

TEST(OpenAiResponseTest, ChatStreamChunks) {
  CompletionRequest request;
  request.kind = ApiKind::kChat;
  request.stream = true;
  request.include_usage = true;
  CompletionResponse response(request, "chatcmpl-1", 1700000000, "asked");
  std::string stream = response.StreamEvent(Started(4));
  stream += response.StreamEvent(Token(10, "Once"));
  stream += response.StreamEvent(Token(11, ""));  // Held-back UTF-8: no chunk.
  stream += response.StreamEvent(Token(-1, " upon"));
  stream += response.StreamEvent(Done(v1::FINISH_REASON_LENGTH, 4, 2));
  EXPECT_TRUE(absl::StartsWith(stream, "data: {"));
  EXPECT_TRUE(absl::EndsWith(stream, "\n\ndata: [DONE]\n\n"));
  bool done;
  std::vector<Json> chunks = Payloads(stream, &done);
  ASSERT_TRUE(done);
  ASSERT_EQ(chunks.size(), 5u);
  for (const Json& c : chunks) {
    EXPECT_EQ(c["id"], "chatcmpl-1");
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["created"], 1700000000);
    EXPECT_EQ(c["model"], "stories260K");
  }
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], Json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["content"], "Once");
  EXPECT_TRUE(chunks[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunks[1]["usage"].is_null());
  EXPECT_EQ(chunks[2]["choices"][0]["delta"]["content"], " upon");
  EXPECT_EQ(chunks[3]["choices"][0]["delta"], Json::object());
  EXPECT_EQ(chunks[3]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(chunks[4]["choices"].empty());
  EXPECT_EQ(chunks[4]["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(chunks[4]["usage"]["completion_tokens"], 2);
  EXPECT_EQ(chunks[4]["usage"]["total_tokens"], 6);
}

// A reply with reasoning (gpt-oss's harmony; a <think> block: Qwen3,
// DeepSeek-R1, GLM-4.5; one the prompt opened: DeepSeek-V3.1): the reasoning streams as
// reasoning_content, the answer as content, the markup as neither; the one-piece body says the
// same. A plain completion of the same tokens keeps them as text.
TEST(OpenAiResponseTest, ReasoningRepliesSplitReasoningFromContent) {
  struct Reply {
    std::vector<std::string> pieces;
    bool open;  // The prompt opened the block (DeepSeek-V3.1 thinking).
  };
  const std::vector<Reply> replies = {
      {{"<|channel|>", "analysis", "<|message|>", "Add them.", "<|end|>", "<|start|>", "assistant",
        "<|channel|>", "final", "<|message|>", "4"},
       false},
      {{"\n", "<think>", "Add", " them.", "\n", "</think>", "\n\n", "4"}, false},
      {{"Add", " them.", "</think>", "\n\n", "4"}, true}};
  for (const auto& [pieces, open] : replies) {
    CompletionRequest request;
    request.kind = ApiKind::kChat;
    request.stream = true;
    CompletionResponse streamed(request, "chatcmpl-2", 1700000000, "m");
    request.stream = false;
    CompletionResponse whole(request, "chatcmpl-3", 1700000000, "m");
    std::string stream = streamed.StreamEvent(Started(3, open));
    whole.Add(Started(3, open));
    int id = 0;
    std::string raw;
    for (const std::string& piece : pieces) {
      stream += streamed.StreamEvent(Token(id, piece));
      whole.Add(Token(id++, piece));
      raw += piece;
    }
    stream += streamed.StreamEvent(Done(v1::FINISH_REASON_EOS, 3, id));
    whole.Add(Done(v1::FINISH_REASON_EOS, 3, id));
    bool done = false;
    std::string reasoning, content;
    for (const Json& chunk : Payloads(stream, &done)) {
      const Json& delta = chunk["choices"][0]["delta"];
      if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
      if (delta.contains("content")) content += delta["content"];
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(reasoning, "Add them.") << raw;
    EXPECT_EQ(content, "4") << raw;
    const Json body = Json::parse(whole.Body());
    EXPECT_EQ(body["choices"][0]["message"]["content"], "4") << raw;
    EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "Add them.") << raw;

    // reasoning_format "none": the chat reply as it came.
    request.split_reasoning = false;
    CompletionResponse raw_chat(request, "chatcmpl-4", 1700000000, "m");
    raw_chat.Add(Started(3, open));
    for (const std::string& piece : pieces) raw_chat.Add(Token(0, piece));
    raw_chat.Add(Done(v1::FINISH_REASON_EOS, 3, id));
    const Json raw_body = Json::parse(raw_chat.Body());
    EXPECT_EQ(raw_body["choices"][0]["message"]["content"], raw);
    EXPECT_FALSE(raw_body["choices"][0]["message"].contains("reasoning_content"));

    request.kind = ApiKind::kCompletion;
    CompletionResponse plain(request, "cmpl-1", 1700000000, "m");
    plain.Add(Started(3));
    for (const std::string& piece : pieces) plain.Add(Token(0, piece));
    plain.Add(Done(v1::FINISH_REASON_EOS, 3, id));
    EXPECT_EQ(Json::parse(plain.Body())["choices"][0]["text"], raw);
  }
}

CompletionRequest ToolsRequest(bool stream) {
  CompletionRequest request;
  request.kind = ApiKind::kChat;
  request.stream = stream;
  request.generate.mutable_chat()->set_tools(
      R"([{"type": "function", "function": {"name": "get_weather"}}])");
  return request;
}

// A reply that reasons, says a word and calls two tools, in Qwen's markup
// cut at awkward places.
const std::vector<std::string> kCallingReply = {
    "<think>Need the weather.</think>\n\nChecking.\n<tool_", "call>\n{\"name\": \"get_weather\", ",
    "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": ",
    "\"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"};

TEST(OpenAiResponseTest, ToolCallsStream) {
  CompletionResponse response(ToolsRequest(true), "chatcmpl-1", 1700000000, "asked");
  std::string stream = response.StreamEvent(Started(4, false, "hermes"));
  for (size_t i = 0; i < kCallingReply.size(); ++i) {
    stream += response.StreamEvent(Token(static_cast<int>(i), kCallingReply[i]));
  }
  stream += response.StreamEvent(Done(v1::FINISH_REASON_EOS, 4, 4));
  bool done;
  std::vector<Json> chunks = Payloads(stream, &done);
  ASSERT_TRUE(done);
  std::string reasoning, content;
  std::vector<Json> calls;
  for (const Json& c : chunks) {
    const Json& delta = c["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
    if (delta.contains("content")) content += delta["content"];
    if (delta.contains("tool_calls")) {
      for (const Json& call : delta["tool_calls"]) calls.push_back(call);
    }
  }
  EXPECT_EQ(reasoning, "Need the weather.");
  EXPECT_EQ(content, "Checking.\n");
  ASSERT_EQ(calls.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(calls[i]["index"], i);
    EXPECT_EQ(calls[i]["type"], "function");
    EXPECT_TRUE(absl::StartsWith(calls[i]["id"].get<std::string>(), "call_"));
    EXPECT_EQ(calls[i]["function"]["name"], "get_weather");
  }
  EXPECT_NE(calls[0]["id"], calls[1]["id"]);
  // As the model writes JSON (its template's tojson).
  EXPECT_EQ(calls[0]["function"]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(calls[1]["function"]["arguments"], R"({"city": "Oslo"})");
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
}

TEST(OpenAiResponseTest, ToolCallsBody) {
  CompletionResponse response(ToolsRequest(false), "chatcmpl-1", 1700000000, "asked");
  response.Add(Started(4, false, "kimi-k2"));
  response.Add(Token(1, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"));
  response.Add(Token(2, "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>"));
  response.Add(Token(3, "<|tool_calls_section_end|>"));
  response.Add(Done(v1::FINISH_REASON_EOS, 4, 3));
  const Json body = Json::parse(response.Body());
  const Json& message = body["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());  // Only calls.
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  // Kimi-K2 names its calls; the name goes back to it with the result.
  EXPECT_EQ(message["tool_calls"][0]["id"], "functions.get_weather:0");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");

  // Cut off by max_tokens inside a call: what it wrote is content, and the
  // reason is length.
  CompletionResponse cut(ToolsRequest(false), "chatcmpl-2", 1700000000, "asked");
  cut.Add(Started(4, false, "hermes"));
  cut.Add(Token(1, "Sure.<tool_call>{\"name\": \"get_wea"));
  cut.Add(Done(v1::FINISH_REASON_LENGTH, 4, 1));
  const Json cut_body = Json::parse(cut.Body());
  EXPECT_EQ(cut_body["choices"][0]["message"]["content"], "Sure.<tool_call>{\"name\": \"get_wea");
  EXPECT_FALSE(cut_body["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(cut_body["choices"][0]["finish_reason"], "length");

  // Tools offered to a request whose started event names no format (the
  // engine refuses those; a reply without markup stays as it came).
  CompletionResponse plain(ToolsRequest(false), "chatcmpl-3", 1700000000, "asked");
  plain.Add(Started(4));
  plain.Add(Token(1, "<tool_call>{\"name\": \"get_weather\"}</tool_call>"));
  plain.Add(Done(v1::FINISH_REASON_EOS, 4, 1));
  const Json plain_body = Json::parse(plain.Body());
  EXPECT_EQ(plain_body["choices"][0]["message"]["content"],
            "<tool_call>{\"name\": \"get_weather\"}</tool_call>");
  EXPECT_EQ(plain_body["choices"][0]["finish_reason"], "stop");
}

// gpt-oss calls a tool in a message to functions.NAME after its reasoning;
// the reply ends at <|call|> (an end token: not in the text).
TEST(OpenAiResponseTest, HarmonyToolCalls) {
  const std::string reasoning = "<|channel|>analysis<|message|>Need it.<|end|>";
  const std::string call =
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\":\"Paris\"}";
  CompletionResponse response(ToolsRequest(false), "chatcmpl-1", 1700000000, "asked");
  response.Add(Started(4, false, "harmony"));
  response.Add(Token(1, reasoning));
  response.Add(Token(2, call));
  response.Add(Done(v1::FINISH_REASON_EOS, 4, 2));
  const Json body = Json::parse(response.Body());
  const Json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "Need it.");
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");

  // Cut short inside the arguments: not a call, and the reason is length.
  CompletionResponse cut(ToolsRequest(false), "chatcmpl-2", 1700000000, "asked");
  cut.Add(Started(4, false, "harmony"));
  cut.Add(Token(1, reasoning + call.substr(0, call.size() - 4)));
  cut.Add(Done(v1::FINISH_REASON_LENGTH, 4, 1));
  const Json cut_body = Json::parse(cut.Body());
  EXPECT_EQ(cut_body["choices"][0]["message"]["content"], "{\"city\":\"Par");
  EXPECT_FALSE(cut_body["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(cut_body["choices"][0]["finish_reason"], "length");
}

TEST(OpenAiResponseTest, CompletionStreamWithoutUsage) {
  CompletionRequest request;
  request.kind = ApiKind::kCompletion;
  request.stream = true;
  CompletionResponse response(request, "cmpl-1", 1, "m");
  std::string stream = response.StreamEvent(Started(1));
  EXPECT_EQ(stream, "");  // Completions have no role chunk.
  stream += response.StreamEvent(Token(5, "Hi"));
  stream += response.StreamEvent(Done(v1::FINISH_REASON_EOS, 1, 1));
  bool done;
  std::vector<Json> chunks = Payloads(stream, &done);
  ASSERT_TRUE(done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["object"], "text_completion");
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "Hi");
  EXPECT_FALSE(chunks[0].contains("usage"));
  EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAiResponseTest, ChatBodyWithLogprobs) {
  CompletionRequest request;
  request.kind = ApiKind::kChat;
  request.logprobs = true;
  CompletionResponse response(request, "chatcmpl-2", 5, "m");
  response.Add(Started(3));
  response.Add(Token(7, "A", -0.25f));
  response.Add(Token(8, "é", -1.0f));
  response.Add(Done(v1::FINISH_REASON_STOP_SEQUENCE, 3, 2));
  ASSERT_TRUE(response.done());
  Json body = Json::parse(response.Body());
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "stories260K");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Aé");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  const Json& content = body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "A");
  EXPECT_DOUBLE_EQ(content[0]["logprob"].get<double>(), -0.25);
  EXPECT_EQ(content[1]["bytes"], Json({0xc3, 0xa9}));
  EXPECT_EQ(content[1]["top_logprobs"][0]["token"], "é");
  EXPECT_EQ(body["usage"], Json({{"prompt_tokens", 3},
                                 {"completion_tokens", 2},
                                 {"total_tokens", 5},
                                 {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
}

TEST(OpenAiResponseTest, CompletionBodyLogprobsAreParallelArrays) {
  CompletionRequest request;
  request.kind = ApiKind::kCompletion;
  request.logprobs = true;
  CompletionResponse response(request, "cmpl-2", 5, "m");
  response.Add(Started(1));
  response.Add(Token(7, "One", -0.5f));
  response.Add(Token(8, " two", -1.5f));
  response.Add(Done(v1::FINISH_REASON_CONTEXT_FULL, 1, 2));
  Json body = Json::parse(response.Body());
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "One two");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  const Json& lp = body["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({"One", " two"}));
  EXPECT_EQ(lp["token_logprobs"], Json({-0.5, -1.5}));
  EXPECT_EQ(lp["text_offset"], Json({0, 3}));
  EXPECT_EQ(lp["top_logprobs"][1], Json({{" two", -1.5}}));
}

TEST(OpenAiResponseTest, ErrorsAndIds) {
  ApiError error = ErrorFromStatus(absl::ResourceExhaustedError("queue full"));
  EXPECT_EQ(error.status, 429);
  Json j = Json::parse(error.ToJson());
  EXPECT_EQ(j["error"]["message"], "queue full");
  EXPECT_EQ(j["error"]["type"], "rate_limit_error");
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_EQ(CompletionResponse::StreamError(error), "data: " + error.ToJson() + "\n\n");
  EXPECT_EQ(ErrorFromStatus(absl::NotFoundError("x")).status, 404);
  EXPECT_EQ(ErrorFromStatus(absl::InvalidArgumentError("x")).status, 400);
  EXPECT_EQ(ErrorFromStatus(absl::OutOfRangeError("x")).status, 400);
  EXPECT_EQ(ErrorFromStatus(absl::UnavailableError("x")).status, 503);
  EXPECT_EQ(ErrorFromStatus(absl::InternalError("x")).status, 500);
  EXPECT_EQ(ErrorFromStatus(absl::FailedPreconditionError("x")).status, 500);
  Json bad = Json::parse(BadRequest("n must be 1", "n").ToJson());
  EXPECT_EQ(bad["error"]["param"], "n");

  const std::string a = NewCompletionId(ApiKind::kChat), b = NewCompletionId(ApiKind::kChat);
  EXPECT_TRUE(absl::StartsWith(a, "chatcmpl-"));
  EXPECT_EQ(a.size(), 9u + 24u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(absl::StartsWith(NewCompletionId(ApiKind::kCompletion), "cmpl-"));
}

}  // namespace
}  // namespace waste::http
