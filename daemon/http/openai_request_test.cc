#include "daemon/http/openai_request.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace waste::http {
namespace {

CompletionRequest Parse(ApiKind kind, const std::string& body) {
  CompletionRequest request;
  ApiError error;
  EXPECT_TRUE(ParseCompletionRequest(kind, body, &request, &error)) << error.message;
  return request;
}

ApiError Refuse(ApiKind kind, const std::string& body) {
  CompletionRequest request;
  ApiError error;
  EXPECT_FALSE(ParseCompletionRequest(kind, body, &request, &error)) << body;
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.type, "invalid_request_error");
  return error;
}

TEST(OpenAiRequestTest, ChatMapsOntoTheEngine) {
  CompletionRequest r = Parse(ApiKind::kChat, R"({
    "model": "m", "messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null}
    ],
    "max_completion_tokens": 12, "max_tokens": 99, "temperature": 0, "top_p": 0.5, "seed": 7,
    "stop": ["\n\n", ""], "n": 1, "stream": true, "stream_options": {"include_usage": true},
    "logprobs": true, "top_logprobs": 3, "presence_penalty": 0.5, "user": "u1",
    "tools": [], "response_format": {"type": "text"}, "top_k": 40
  })");
  const v1::GenerateRequest& g = r.generate;
  EXPECT_EQ(g.model(), "m");
  ASSERT_TRUE(g.has_chat());
  ASSERT_EQ(g.chat().messages_size(), 3);
  EXPECT_EQ(g.chat().messages(0).role(), "system");
  EXPECT_EQ(g.chat().messages(1).content(), "Hi there");
  EXPECT_EQ(g.chat().messages(2).content(), "");
  EXPECT_EQ(g.max_tokens(), 12);  // max_completion_tokens wins.
  EXPECT_EQ(g.sampling().temperature(), 0.0f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.5f);
  EXPECT_EQ(g.sampling().seed(), 7u);
  EXPECT_EQ(g.sampling().top_k(), 40);
  EXPECT_FLOAT_EQ(g.sampling().presence_penalty(), 0.5f);
  EXPECT_EQ(g.sampling().penalty_last_n(), -1);
  EXPECT_EQ(std::vector<std::string>(g.stop().begin(), g.stop().end()),
            std::vector<std::string>{"\n\n"});
  EXPECT_EQ(g.top_logprobs(), 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
}

// Reasoning controls: OpenAI's reasoning_effort, and llama.cpp's
// chat_template_kwargs (enable_thinking, reasoning_effort).
TEST(OpenAiRequestTest, ReasoningControls) {
  const CompletionRequest effort = Parse(ApiKind::kChat, R"({
    "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "high"})");
  EXPECT_EQ(effort.generate.chat().reasoning_effort(), "high");
  EXPECT_FALSE(effort.generate.chat().has_thinking());
  const CompletionRequest kwargs = Parse(ApiKind::kChat, R"({
    "messages": [{"role": "user", "content": "x"}],
    "chat_template_kwargs": {"enable_thinking": false, "reasoning_effort": "low"}})");
  ASSERT_TRUE(kwargs.generate.chat().has_thinking());
  EXPECT_FALSE(kwargs.generate.chat().thinking());
  EXPECT_EQ(kwargs.generate.chat().reasoning_effort(), "low");
  EXPECT_TRUE(kwargs.split_reasoning);
  const CompletionRequest v31 = Parse(ApiKind::kChat, R"({
    "messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"thinking": true}})");
  EXPECT_TRUE(v31.generate.chat().thinking());
  EXPECT_FALSE(Parse(ApiKind::kChat, R"({
    "messages": [{"role": "user", "content": "x"}], "reasoning_format": "none"})")
                   .split_reasoning);
}

TEST(OpenAiRequestTest, OpenAiDefaults) {
  CompletionRequest chat =
      Parse(ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}]})");
  EXPECT_FLOAT_EQ(chat.generate.sampling().temperature(), 1.0f);
  EXPECT_FALSE(chat.generate.has_max_tokens());  // Until EOS or the context's end.
  EXPECT_EQ(chat.generate.model(), "");
  EXPECT_FALSE(chat.stream);
  EXPECT_FALSE(chat.logprobs);
  EXPECT_EQ(chat.generate.top_logprobs(), 0);

  CompletionRequest completion = Parse(ApiKind::kCompletion, R"({"model": "m", "prompt": "Once"})");
  EXPECT_EQ(completion.generate.prompt(), "Once");
  EXPECT_EQ(completion.generate.max_tokens(), kDefaultCompletionMaxTokens);
  // stream_options without stream is ignored, as are nulls.
  CompletionRequest nulls = Parse(
      ApiKind::kCompletion,
      R"({"prompt": null, "stop": null, "max_tokens": null, "stream_options": {"include_usage": true}})");
  EXPECT_FALSE(nulls.include_usage);
  EXPECT_TRUE(nulls.generate.has_prompt());
  EXPECT_EQ(nulls.generate.prompt(), "");
}

TEST(OpenAiRequestTest, CompletionPromptAndLogprobs) {
  // No prompt: from the beginning of a document (BOS), like OpenAI.
  CompletionRequest empty =
      Parse(ApiKind::kCompletion, R"({"max_tokens": 256.0, "temperature": 0})");
  EXPECT_TRUE(empty.generate.has_prompt());
  EXPECT_EQ(empty.generate.prompt(), "");
  EXPECT_EQ(empty.generate.max_tokens(), 256);
  CompletionRequest one =
      Parse(ApiKind::kCompletion,
            R"({"prompt": ["a b"], "logprobs": 2, "stop": "x", "echo": false, "best_of": 1})");
  EXPECT_EQ(one.generate.prompt(), "a b");
  EXPECT_TRUE(one.logprobs);
  EXPECT_EQ(one.generate.top_logprobs(), 2);
  EXPECT_EQ(one.generate.stop_size(), 1);
  CompletionRequest zero = Parse(ApiKind::kCompletion, R"({"prompt": "a", "logprobs": 0})");
  EXPECT_TRUE(zero.logprobs);  // The chosen token's logprob only.
  EXPECT_EQ(zero.generate.top_logprobs(), 0);
}

TEST(OpenAiRequestTest, BadFieldsAreNamed) {
  struct Case {
    ApiKind kind;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {ApiKind::kChat, R"({"messages": []})", "messages"},
      {ApiKind::kChat, R"({"model": "m"})", "messages"},
      {ApiKind::kChat, R"({"messages": "hi"})", "messages"},
      {ApiKind::kChat, R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0]"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", "n"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "temperature": 2.5})",
       "temperature"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})",
       "temperature"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0})", "top_p"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})",
       "max_tokens"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5})",
       "max_tokens"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "seed": -1})", "seed"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       "top_logprobs"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})",
       "top_logprobs"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})", "stop"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
       "tools"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})",
       "response_format"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"1": 5}})", "logit_bias"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "stream": "yes"})",
       "stream"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "frobnicate": 1})",
       "frobnicate"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "stream": true, "stream_options": {"include_usage": 1}})",
       "stream_options.include_usage"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"})",
       "reasoning_effort"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": "no"}})",
       "chat_template_kwargs.enable_thinking"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"tools_in_user": true}})",
       "chat_template_kwargs.tools_in_user"},
      {ApiKind::kCompletion, R"({"prompt": "a", "reasoning_effort": "low"})", "reasoning_effort"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "reasoning_format": "raw"})",
       "reasoning_format"},
      {ApiKind::kCompletion, R"({"prompt": [1, 2, 3]})", "prompt"},
      {ApiKind::kCompletion, R"({"prompt": ["a", "b"]})", "prompt"},
      {ApiKind::kCompletion, R"({"prompt": "a", "echo": true})", "echo"},
      {ApiKind::kCompletion, R"({"prompt": "a", "suffix": "z"})", "suffix"},
      {ApiKind::kCompletion, R"({"prompt": "a", "best_of": 3})", "best_of"},
      {ApiKind::kCompletion, R"({"prompt": "a", "logprobs": true})", "logprobs"},
      {ApiKind::kCompletion, R"({"prompt": "a", "messages": []})", "messages"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required"})",
       "tool_choice"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function", "function": {"name": "f"}}})",
       "tool_choice"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]})",
       "tools"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "functions": [{"name": "f"}]})",
       "functions"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "c"}]}]})",
       "messages[1].tool_calls[0]"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]})",
       "messages[1].tool_calls[0]"},
      {ApiKind::kChat,
       R"({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": 7, "content": "r"}]})",
       "messages[1].tool_call_id"},
  };
  for (const Case& c : cases) {
    ApiError error = Refuse(c.kind, c.body);
    EXPECT_EQ(error.param, c.param) << c.body << ": " << error.message;
    EXPECT_TRUE(absl::StrContains(error.message, c.param)) << error.message;
  }
  const std::string too_many_stops =
      R"({"messages": [{"role": "user", "content": "x"}], "stop": [)" +
      [] {
        std::string s;
        for (int i = 0; i <= kMaxStopSequences; ++i)
          s += absl::StrCat(i ? "," : "", "\"s", i, "\"");
        return s;
      }() +
      "]}";
  EXPECT_EQ(Refuse(ApiKind::kChat, too_many_stops).param, "stop");
}

// Tools reach the engine as the client wrote them (keys in its order, as
// the model's template renders them); earlier calls and their results too.
TEST(OpenAiRequestTest, ToolsAndCalls) {
  CompletionRequest r = Parse(ApiKind::kChat, R"({
    "messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "call_2", "type": "function",
         "function": {"name": "get_time", "arguments": {"zone": "CET", "h24": true}}},
        {"id": "call_3", "type": "function", "function": {"name": "get_time", "arguments": " "}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18"}],
    "tools": [{"type": "function", "function": {"name": "get_weather",
               "parameters": {"type": "object", "properties": {"zip": {}, "city": {}}}}}],
    "tool_choice": "auto", "parallel_tool_calls": true})");
  const v1::ChatMessages& chat = r.generate.chat();
  EXPECT_EQ(chat.tools(),
            R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
            R"("properties":{"zip":{},"city":{}}}}}])");
  ASSERT_EQ(chat.messages_size(), 3);
  ASSERT_EQ(chat.messages(1).tool_calls_size(), 3);
  EXPECT_EQ(chat.messages(1).content(), "");
  EXPECT_EQ(chat.messages(1).tool_calls(0).id(), "call_1");
  EXPECT_EQ(chat.messages(1).tool_calls(0).name(), "get_weather");
  EXPECT_EQ(chat.messages(1).tool_calls(0).arguments(), R"({"city": "Paris"})");
  // An object: as the templates' tojson writes it.
  EXPECT_EQ(chat.messages(1).tool_calls(1).arguments(), R"({"zone": "CET", "h24": true})");
  EXPECT_EQ(chat.messages(1).tool_calls(2).arguments(), "{}");  // Blank: none.
  EXPECT_EQ(chat.messages(2).tool_call_id(), "call_1");

  // tool_choice "none": the model is not offered them.
  r = Parse(ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}],
    "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})");
  EXPECT_EQ(r.generate.chat().tools(), "");
  r = Parse(ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "tools": []})");
  EXPECT_EQ(r.generate.chat().tools(), "");
}

// Every request may start from an earlier one's KV cache, unless it says
// cache_prompt: false (llama.cpp's extension).
TEST(OpenAiRequestTest, CachePrompt) {
  EXPECT_TRUE(Parse(ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}]})")
                  .generate.cache_prompt());
  EXPECT_TRUE(Parse(ApiKind::kCompletion, R"({"prompt": "x"})").generate.cache_prompt());
  EXPECT_FALSE(Parse(ApiKind::kCompletion, R"({"prompt": "x", "cache_prompt": false})")
                   .generate.cache_prompt());
  EXPECT_EQ(Refuse(ApiKind::kCompletion, R"({"prompt": "x", "cache_prompt": 1})").param,
            "cache_prompt");
}

TEST(OpenAiRequestTest, MalformedBodies) {
  for (const char* body : {"", "{", "not json", "[1, 2]", "\"string\"", "{\"a\": }"}) {
    ApiError error = Refuse(ApiKind::kChat, body);
    EXPECT_EQ(error.param, "");
  }
  // Deep nesting is refused before the parser sees it.
  std::string deep(100000, '[');
  EXPECT_TRUE(absl::StrContains(Refuse(ApiKind::kChat, deep).message, "nests deeper"));
  // Brackets inside strings do not count.
  std::string brackets =
      R"({"messages": [{"role": "user", "content": ")" + std::string(1000, '[') + R"("}]})";
  EXPECT_EQ(Parse(ApiKind::kChat, brackets).generate.chat().messages(0).content().size(), 1000u);
}

}  // namespace
}  // namespace waste::http
