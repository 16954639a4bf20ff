// Tool calling end to end: the real wasted binary serving a synthetic model
// whose GGUF carries a Qwen-style chat template, next to stories260K (no
// template). Tools and earlier calls and results reach the prompt (it grows
// by them), an agent's next turn computes only its new tokens (the earlier
// request's KV cache is reused), the started event names the markup the
// model writes calls in,
// and a model whose template has no tool calling refuses them, over HTTP and
// gRPC alike. (The weights are random, so the reply is noise: taking calls
// out of a reply is covered by common/tool_call_stream_test and the OpenAI
// shapes by daemon/http/openai_response_test.)
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/tools/synthetic_model.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "tests/http_client.h"
#include "tests/http_daemon.h"
#include "tests/testdata.h"

namespace waste {
namespace {

using Json = nlohmann::json;

// What identifies Qwen2.5/Qwen3's template (results in a user turn, calls in
// <tool_call> blocks); the daemon renders the family, not this text.
constexpr char kQwenTemplate[] =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}<tools></tools>{%- endif %}"
    "{{- '<|im_start|>user' }}<tool_response><tool_call>{{- '<|im_start|>assistant\\n' }}";

// What identifies Llama 3.1/3.2/3.3's template (JSON calls, ipython turns).
constexpr char kLlama31Template[] =
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}{%- if tools is not none %}"
    "{{- 'Environment: ipython\\n' }}{%- endif %}";

// What identifies Mistral Nemo's template.
constexpr char kMistralTemplate[] =
    "{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}";

// What identifies Mistral 7B v0.3's (Nemo's with spaces).
constexpr char kMistralV03Template[] =
    "{{- \"[AVAILABLE_TOOLS] [\" }}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}";

// Mistral Small 3's: [SYSTEM_PROMPT], and the default system message it writes
// when a conversation has none.
constexpr char kMistralSmall3Template[] =
    "{%- set default_system_message = \"You are Mistral Small 3, a Large Language Model (LLM) "
    "created by Mistral AI, a French startup headquartered in Paris.\" %}"
    "{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' }}";

constexpr char kTools[] = R"([{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city now.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}])";

class ToolsApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string models = testing::TempDir();
    tools::MkModelOptions options;
    options.dim = 128;
    options.layers = 2;
    options.heads = 4;
    options.ctx = 2048;
    // One model per template, named after it.
    for (const auto& [name, chat_template] :
         {std::pair{"qwen", kQwenTemplate}, std::pair{"llama31", kLlama31Template},
          std::pair{"mistral", kMistralTemplate}, std::pair{"mistral03", kMistralV03Template},
          std::pair{"small3", kMistralSmall3Template}}) {
      options.out = absl::StrCat(models, "/", name, ".gguf");
      options.chat_template = chat_template;
      start_ = tools::WriteSyntheticModel(options, storage::Env::Default()).status();
      if (!start_.ok()) return;
    }
    // A copy: the daemon serves the folder's own files.
    std::error_code error;
    std::filesystem::copy_file(testing::ModelPath("stories260K/stories260K.gguf"),
                               models + "/stories260K.gguf", error);
    if (error) {
      start_ =
          absl::InternalError("cannot copy stories260K into the models folder: " + error.message());
      return;
    }
    daemon_ = new testing::HttpDaemon(models);
    start_ = daemon_->Start();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_.ok()) << start_; }

  // A chat completion's status and body.
  std::pair<int, Json> Chat(const Json& request) {
    absl::StatusOr<testing::HttpResponse> response =
        testing::HttpCall(daemon_->http_port(), "POST", "/v1/chat/completions", request.dump());
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return {0, Json()};
    return {response->status, Json::parse(response->body, nullptr, false)};
  }

  static Json Request(const std::string& model, Json messages) {
    return {{"model", model}, {"max_tokens", 4}, {"temperature", 0}, {"messages", messages}};
  }

  static testing::HttpDaemon* daemon_;
  static absl::Status start_;
};

testing::HttpDaemon* ToolsApiTest::daemon_ = nullptr;
absl::Status ToolsApiTest::start_;

TEST_F(ToolsApiTest, ToolsReachThePrompt) {
  const Json question = Json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  auto [plain_status, plain] = Chat(Request("qwen", question));
  ASSERT_EQ(plain_status, 200) << plain.dump();
  Json with_tools = Request("qwen", question);
  with_tools["tools"] = Json::parse(kTools);
  auto [status, body] = Chat(with_tools);
  ASSERT_EQ(status, 200) << body.dump();
  // The system turn that offers the tool: hundreds of bytes of byte-level
  // tokens more.
  const int plain_tokens = plain["usage"]["prompt_tokens"];
  const int tools_tokens = body["usage"]["prompt_tokens"];
  EXPECT_GT(tools_tokens, plain_tokens + 300);
  // The next turn of an agent resends it all: only what is new is computed
  // (cache_prompt, on for every OpenAI request).
  Json next_turn = with_tools;
  next_turn["messages"].push_back({{"role", "assistant"}, {"content", "Let me check."}});
  next_turn["messages"].push_back({{"role", "user"}, {"content", "Go on."}});
  auto [next_status, next] = Chat(next_turn);
  ASSERT_EQ(next_status, 200) << next.dump();
  EXPECT_GE(next["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), tools_tokens - 1);
  EXPECT_LT(next["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            next["usage"]["prompt_tokens"].get<int>());
  next_turn["cache_prompt"] = false;  // llama.cpp's switch.
  auto [cold_status, cold] = Chat(next_turn);
  ASSERT_EQ(cold_status, 200) << cold.dump();
  EXPECT_EQ(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const std::string finish = body["choices"][0]["finish_reason"];
  EXPECT_TRUE(finish == "length" || finish == "stop" || finish == "tool_calls") << finish;

  // tool_choice "none": not offered.
  with_tools["tool_choice"] = "none";
  auto [none_status, none] = Chat(with_tools);
  ASSERT_EQ(none_status, 200) << none.dump();
  EXPECT_EQ(none["usage"]["prompt_tokens"].get<int>(), plain_tokens);

  // An earlier call and its result go back to the model.
  Json answered = question;
  answered.push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}}}}}});
  answered.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18 C, sunny"}});
  auto [answered_status, after] = Chat(Request("qwen", answered));
  ASSERT_EQ(answered_status, 200) << after.dump();
  EXPECT_GT(after["usage"]["prompt_tokens"].get<int>(), plain_tokens + 40);
}

TEST_F(ToolsApiTest, StartedEventNamesTheCallMarkup) {
  v1::GenerateRequest request;
  request.set_model("qwen");
  request.set_max_tokens(2);
  v1::ChatMessage* message = request.mutable_chat()->add_messages();
  message->set_role("user");
  message->set_content("Weather?");
  auto format = [&]() {
    std::string tool_format = "unset";
    const absl::Status status =
        daemon_->client().Generate(request, [&](const v1::GenerateEvent& event) {
          if (event.has_started()) tool_format = event.started().tool_format();
          return true;
        });
    EXPECT_TRUE(status.ok()) << status;
    return tool_format;
  };
  EXPECT_EQ(format(), "");
  request.mutable_chat()->set_tools(kTools);
  EXPECT_EQ(format(), "hermes");
  request.set_model("llama31");
  EXPECT_EQ(format(), "llama3-json");
  request.set_model("mistral");
  EXPECT_EQ(format(), "mistral");
  request.set_model("mistral03");
  EXPECT_EQ(format(), "mistral");
}

// Mistral Small 3: without a system message, the prompt holds its
// template's default one; with one, that instead. Its calls are another
// markup: tools are refused, naming the format.
TEST_F(ToolsApiTest, MistralSmall3DefaultSystemMessage) {
  const Json question = {{"role", "user"}, {"content", "Hi"}};
  auto [plain_status, plain] = Chat(Request("small3", Json::array({question})));
  ASSERT_EQ(plain_status, 200) << plain.dump();
  auto [system_status, system] =
      Chat(Request("small3", Json::array({{{"role", "system"}, {"content", "S"}}, question})));
  ASSERT_EQ(system_status, 200) << system.dump();
  EXPECT_GT(plain["usage"]["prompt_tokens"].get<int>(),
            system["usage"]["prompt_tokens"].get<int>() + 20);
  Json with_tools = Request("small3", Json::array({question}));
  with_tools["tools"] = Json::parse(kTools);
  auto [tools_status, tools_body] = Chat(with_tools);
  EXPECT_EQ(tools_status, 400) << tools_body.dump();
  const std::string message = tools_body["error"]["message"];
  EXPECT_TRUE(absl::StrContains(message, "mistral-v7")) << message;
}

// Llama 3.1: the tools go in the first user turn; its template takes one
// call per assistant message, and more are refused.
TEST_F(ToolsApiTest, Llama31ToolsAndItsOneCallPerMessage) {
  const Json question = Json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  auto [plain_status, plain] = Chat(Request("llama31", question));
  ASSERT_EQ(plain_status, 200) << plain.dump();
  Json with_tools = Request("llama31", question);
  with_tools["tools"] = Json::parse(kTools);
  auto [status, body] = Chat(with_tools);
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_GT(body["usage"]["prompt_tokens"].get<int>(),
            plain["usage"]["prompt_tokens"].get<int>() + 300);
  const Json call = {
      {"type", "function"},
      {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}}};
  Json two = question;
  two.push_back({{"role", "assistant"}, {"tool_calls", Json::array({call, call})}});
  auto [two_status, two_body] = Chat(Request("llama31", two));
  EXPECT_EQ(two_status, 400) << two_body.dump();
  const std::string message = two_body["error"]["message"];
  EXPECT_TRUE(absl::StrContains(message, "one tool call")) << message;
}

TEST_F(ToolsApiTest, RefusedWhereTheTemplateHasNoToolCalling) {
  Json request = Request("stories260K", Json::array({{{"role", "user"}, {"content", "Hi"}}}));
  request["tools"] = Json::parse(kTools);
  auto [status, body] = Chat(request);
  EXPECT_EQ(status, 400) << body.dump();
  const std::string message = body["error"]["message"];
  EXPECT_TRUE(absl::StrContains(message, "tools")) << message;
  EXPECT_TRUE(absl::StrContains(message, "plain")) << message;

  // A call whose arguments are not an object, named.
  Json bad = Request(
      "qwen",
      Json::array({{{"role", "user"}, {"content", "Hi"}},
                   {{"role", "assistant"},
                    {"tool_calls",
                     {{{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"arguments", "Paris"}}}}}}}}));
  auto [bad_status, bad_body] = Chat(bad);
  EXPECT_EQ(bad_status, 400) << bad_body.dump();
  EXPECT_EQ(bad_body["error"]["param"], "messages[1].tool_calls[0]");
}

}  // namespace
}  // namespace waste
