// The HTTP face end to end: the real wasted binary serving stories260K with
// --http-listen on a free loopback port and an API key, driven by a small
// HTTP client. Covers the OpenAI endpoints (streamed and not), the golden
// greedy text, every error status, a client that goes away mid-stream, the
// Prometheus page (checked by promtool when installed), and the API key on
// gRPC over TCP. The limits (429, 503, 413, 431, timeouts) are in
// http_limits_e2e_test.cc.
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/http/sse.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/http_client.h"
#include "tests/http_daemon.h"
#include "tests/subprocess.h"
#include "tests/testdata.h"
#include "waste/v1/waste.grpc.pb.h"

namespace waste {
namespace {

using Json = nlohmann::json;
using testing::Bearer;
using testing::HttpCall;
using testing::HttpResponse;

constexpr char kKey[] = "sk-e2e-0123456789";

class HttpApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // f32 KV cache: all 256 golden tokens are exact (f16 keeps the first
    // 114; see generate_e2e_test).
    daemon_ =
        new testing::HttpDaemon(testing::ModelPath("stories260K"),
                                {"--kv-type", "f32", "--api-key", kKey, "--listen", "127.0.0.1:0"});
    start_ = daemon_->Start();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_.ok()) << start_; }

  int port() const { return daemon_->http_port(); }

  HttpResponse Call(const std::string& method, const std::string& path,
                    const std::string& body = "",
                    const testing::RequestHeaders& headers = Bearer(kKey)) {
    absl::StatusOr<HttpResponse> response = HttpCall(port(), method, path, body, headers);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.value_or(HttpResponse());
  }

  // The error object of a response, checked for OpenAI's shape.
  static Json Error(const HttpResponse& response) {
    Json body = Json::parse(response.body, nullptr, false);
    EXPECT_TRUE(body.is_object() && body.contains("error")) << response.body;
    if (!body.is_object() || !body.contains("error")) return Json::object();
    const Json& error = body["error"];
    for (const char* field : {"message", "type", "param", "code"}) {
      EXPECT_TRUE(error.contains(field)) << field << " missing: " << response.body;
    }
    EXPECT_TRUE(error["message"].is_string());
    EXPECT_EQ(response.headers.at("content-type"), "application/json");
    return error;
  }

  // The JSON payloads of a server-sent event stream; `done` says whether
  // it ended with [DONE] (and nothing after it).
  static std::vector<Json> Events(const std::string& body, bool* done) {
    // Every event is exactly `data: <payload>\n\n`.
    EXPECT_TRUE(absl::StartsWith(body, "data: ")) << body.substr(0, 100);
    for (absl::string_view block : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
      EXPECT_TRUE(absl::StartsWith(block, "data: ")) << block;
      EXPECT_EQ(block.find('\n'), absl::string_view::npos) << block;
    }
    http::SseParser parser;
    parser.Feed(body);
    std::vector<Json> events;
    *done = false;
    for (const std::string& data : parser.TakeEvents()) {
      EXPECT_FALSE(*done) << "an event after [DONE]: " << data;
      if (data == "[DONE]") {
        *done = true;
        continue;
      }
      events.push_back(Json::parse(data, nullptr, false));
      EXPECT_TRUE(events.back().is_object()) << data;
    }
    return events;
  }

  static testing::HttpDaemon* daemon_;
  static absl::Status start_;
};

testing::HttpDaemon* HttpApiTest::daemon_ = nullptr;
absl::Status HttpApiTest::start_;

TEST_F(HttpApiTest, HealthIsOpenEverythingElseWantsTheKey) {
  HttpResponse health = Call("GET", "/health", "", {});
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, R"({"status":"ok"})");

  HttpResponse missing = Call("GET", "/v1/models", "", {});
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.headers["www-authenticate"], "Bearer");
  EXPECT_EQ(Error(missing)["type"], "authentication_error");
  HttpResponse wrong = Call("POST", "/v1/completions", R"({"prompt": "x"})", Bearer("sk-wrong"));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(Error(wrong)["code"], "invalid_api_key");
  EXPECT_EQ(Call("GET", "/metrics", "", Bearer(std::string(kKey) + "x")).status, 401);
  EXPECT_EQ(Call("GET", "/metrics", "", {{"Authorization", kKey}}).status, 401);  // No scheme.
}

TEST_F(HttpApiTest, ModelsListsEveryServableModel) {
  HttpResponse models = Call("GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  Json body = Json::parse(models.body);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "stories260K");
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_GT(body["data"][0]["created"].get<int64_t>(), 0);
  HttpResponse one = Call("GET", "/v1/models/stories260K");
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(Json::parse(one.body)["id"], "stories260K");
  HttpResponse none = Call("GET", "/v1/models/nope");
  EXPECT_EQ(none.status, 404);
  EXPECT_EQ(Error(none)["code"], "model_not_found");
}

TEST_F(HttpApiTest, StreamedCompletionIsTheGoldenGreedyText) {
  // An empty prompt starts from BOS: the golden continuation.
  HttpResponse response = Call("POST", "/v1/completions", R"({
      "model": "stories260K", "prompt": "", "max_tokens": 256, "temperature": 0,
      "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.headers["content-type"], "text/event-stream");
  EXPECT_EQ(response.headers["transfer-encoding"], "chunked");
  bool done;
  std::vector<Json> events = Events(response.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 3u);
  std::string text;
  std::string finish;
  const std::string id = events[0]["id"];
  EXPECT_TRUE(absl::StartsWith(id, "cmpl-")) << id;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Json& e = events[i];
    EXPECT_EQ(e["id"], id);
    EXPECT_EQ(e["object"], "text_completion");
    EXPECT_EQ(e["model"], "stories260K");
    EXPECT_TRUE(e["usage"].is_null());
    ASSERT_EQ(e["choices"].size(), 1u);
    text += e["choices"][0]["text"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, testing::StoriesGoldenText());
  EXPECT_EQ(finish, "length");
  const Json& last = events.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["prompt_tokens"], 1);  // BOS.
  EXPECT_EQ(last["usage"]["completion_tokens"], 256);
  EXPECT_EQ(last["usage"]["total_tokens"], 257);
}

TEST_F(HttpApiTest, NonStreamedCompletion) {
  HttpResponse response = Call("POST", "/v1/completions", R"({
      "model": "stories260K", "prompt": "", "max_tokens": 256, "temperature": 0,
      "logprobs": 2})");
  ASSERT_EQ(response.status, 200) << response.body;
  Json body = Json::parse(response.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_TRUE(absl::StartsWith(body["id"].get<std::string>(), "cmpl-"));
  EXPECT_GT(body["created"].get<int64_t>(), 1600000000);
  EXPECT_EQ(body["choices"][0]["text"], testing::StoriesGoldenText());
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  const Json& logprobs = body["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), 256u);
  EXPECT_EQ(logprobs["top_logprobs"][0].size(), 2u);
  EXPECT_LE(logprobs["token_logprobs"][0].get<double>(), 0.0);
  EXPECT_EQ(body["usage"]["completion_tokens"], 256);

  // A stop sequence ends the text before it ("stop").
  HttpResponse stopped = Call("POST", "/v1/completions", R"({
      "model": "stories260K", "prompt": "", "max_tokens": 200, "temperature": 0,
      "stop": "Lily"})");
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  Json stop_body = Json::parse(stopped.body);
  EXPECT_EQ(stop_body["choices"][0]["text"], "Once upon a time, there was a little girl named ");
  EXPECT_EQ(stop_body["choices"][0]["finish_reason"], "stop");
}

TEST_F(HttpApiTest, ChatCompletionsStreamedAndNot) {
  const std::string request = R"({"model": "stories260K", "max_tokens": 12, "temperature": 0,
      "messages": [{"role": "system", "content": "Tell a story."},
                   {"role": "user", "content": "Once upon a time"}]})";
  HttpResponse whole = Call("POST", "/v1/chat/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body;
  Json body = Json::parse(whole.body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_TRUE(absl::StartsWith(body["id"].get<std::string>(), "chatcmpl-"));
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  const std::string content = body["choices"][0]["message"]["content"];
  EXPECT_FALSE(content.empty());
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_GT(body["usage"]["prompt_tokens"].get<int>(), 5);
  EXPECT_EQ(body["usage"]["total_tokens"].get<int>(),
            body["usage"]["prompt_tokens"].get<int>() + 12);

  Json streamed_request = Json::parse(request);
  streamed_request["stream"] = true;
  HttpResponse stream = Call("POST", "/v1/chat/completions", streamed_request.dump());
  ASSERT_EQ(stream.status, 200) << stream.body;
  bool done;
  std::vector<Json> events = Events(stream.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  for (const Json& e : events) {
    EXPECT_FALSE(e.contains("usage"));  // include_usage was not asked for.
    const Json& delta = e["choices"][0]["delta"];
    if (delta.contains("content")) streamed += delta["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, content);  // Greedy: the same text either way.
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
}

TEST_F(HttpApiTest, ErrorStatuses) {
  HttpResponse bad_json = Call("POST", "/v1/chat/completions", "{not json");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_EQ(Error(bad_json)["type"], "invalid_request_error");

  HttpResponse n2 = Call("POST", "/v1/chat/completions",
                         R"({"messages": [{"role": "user", "content": "x"}], "n": 2})");
  EXPECT_EQ(n2.status, 400);
  EXPECT_EQ(Error(n2)["param"], "n");
  HttpResponse hot = Call("POST", "/v1/completions", R"({"prompt": "x", "temperature": 9})");
  EXPECT_EQ(hot.status, 400);
  EXPECT_EQ(Error(hot)["param"], "temperature");

  HttpResponse unknown_model =
      Call("POST", "/v1/completions", R"({"model": "no-such-model", "prompt": "x"})");
  EXPECT_EQ(unknown_model.status, 404);
  Json error = Error(unknown_model);
  EXPECT_EQ(error["code"], "model_not_found");
  EXPECT_TRUE(absl::StrContains(error["message"].get<std::string>(), "no-such-model"));

  HttpResponse no_path = Call("GET", "/v2/whatever");
  EXPECT_EQ(no_path.status, 404);
  Error(no_path);
  HttpResponse wrong_method = Call("GET", "/v1/chat/completions");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_EQ(wrong_method.headers["allow"], "POST");
  Error(wrong_method);

  // Over the 1 MiB default: refused from Content-Length, body unread.
  HttpResponse big =
      Call("POST", "/v1/completions", R"({"prompt": ")" + std::string(2 << 20, 'a') + R"("})");
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(Error(big)["code"], "request_too_large");

  // The daemon still serves.
  EXPECT_EQ(Call("GET", "/health", "", {}).status, 200);
}

TEST_F(HttpApiTest, ChunkedFramingOnTheWire) {
  auto connection = testing::RawConnection::Connect(port());
  ASSERT_TRUE(connection.ok()) << connection.status();
  const std::string body =
      R"({"model": "stories260K", "prompt": "", "max_tokens": 3, "temperature": 0, "stream": true})";
  ASSERT_TRUE((*connection)
                  ->Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: "
                                      "Bearer ",
                                      kKey, "\r\nContent-Length: ", body.size(), "\r\n\r\n", body))
                  .ok());
  const std::string wire = (*connection)->ReadUntil("\r\n0\r\n\r\n", absl::Seconds(60));
  EXPECT_TRUE(absl::StartsWith(wire, "HTTP/1.1 200 OK\r\n")) << wire;
  EXPECT_TRUE(absl::StrContains(wire, "Transfer-Encoding: chunked\r\n")) << wire;
  // The last chunk carries [DONE]; then the terminating zero-size chunk.
  EXPECT_TRUE(absl::EndsWith(wire, "data: [DONE]\n\n\r\n0\r\n\r\n")) << wire;
  // Keep-alive: the same connection serves the next request.
  ASSERT_TRUE((*connection)->Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  const std::string next = (*connection)->ReadUntil(R"({"status":"ok"})", absl::Seconds(10));
  EXPECT_TRUE(absl::EndsWith(next, R"({"status":"ok"})")) << next;
}

// The model's step loop notices the client at its next step: the request
// ends as cancelled with a handful of tokens, not the 100000 it asked for.
TEST_F(HttpApiTest, AClientThatGoesAwayCancelsItsGeneration) {
  auto before = daemon_->client().GetStats(v1::GetStatsRequest());
  ASSERT_TRUE(before.ok()) << before.status();
  int64_t requests_before = 0;
  for (const auto& model : before->models()) requests_before += model.requests();

  auto connection = testing::RawConnection::Connect(port());
  ASSERT_TRUE(connection.ok());
  const std::string body = R"({"model": "stories260K", "prompt": "", "max_tokens": 100000,
      "temperature": 0.8, "stream": true})";
  ASSERT_TRUE((*connection)
                  ->Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: "
                                      "Bearer ",
                                      kKey, "\r\nContent-Length: ", body.size(), "\r\n\r\n", body))
                  .ok());
  const std::string first = (*connection)->ReadUntil("data: {", absl::Seconds(60));
  ASSERT_TRUE(absl::StrContains(first, "data: {")) << first;
  (*connection)->Close();

  absl::Time deadline = absl::Now() + absl::Seconds(30);
  v1::ModelStats stats;
  while (absl::Now() < deadline) {
    auto now = daemon_->client().GetStats(v1::GetStatsRequest());
    ASSERT_TRUE(now.ok()) << now.status();
    int64_t requests = 0;
    for (const auto& model : now->models()) {
      requests += model.requests();
      stats = model;
    }
    if (requests > requests_before && now->active_requests() == 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(stats.running_requests(), 0);
  EXPECT_EQ(stats.queued_requests(), 0);
  // Ended early, and not counted as a failure.
  EXPECT_LT(stats.totals().tokens(), 100000);

  HttpResponse metrics = Call("GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_TRUE(absl::StrContains(
      metrics.body, R"(waste_requests_total{model="stories260K",api="http",outcome="cancelled"} )"))
      << metrics.body;
}

TEST_F(HttpApiTest, MetricsPassPromtool) {
  // Some traffic first, so every family has samples.
  ASSERT_EQ(
      Call("POST", "/v1/completions", R"({"prompt": "Lily", "max_tokens": 5, "temperature": 0})")
          .status,
      200);
  HttpResponse metrics = Call("GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_TRUE(absl::StartsWith(metrics.headers["content-type"], "text/plain; version=0.0.4"));
  for (const char* family :
       {"waste_requests_total", "waste_prompt_tokens_total", "waste_generated_tokens_total",
        "waste_time_to_first_token_seconds_bucket", "waste_time_per_output_token_seconds_bucket",
        "waste_decode_tokens_per_second", "waste_cache_hits_total", "waste_cache_misses_total",
        "waste_disk_read_bytes_total", "waste_io_wait_seconds_total", "waste_ram_used_bytes",
        "waste_ram_budget_bytes", "waste_queued_requests", "waste_running_requests",
        "waste_batch_size_mean", "waste_steps_total", "waste_http_responses_total"}) {
    EXPECT_TRUE(absl::StrContains(metrics.body, absl::StrCat("\n", family, "{")) ||
                absl::StrContains(metrics.body, absl::StrCat("\n", family, " ")))
        << family << " missing";
  }
  EXPECT_TRUE(
      absl::StrContains(metrics.body, "# TYPE waste_time_to_first_token_seconds histogram"));

  std::string promtool;
  for (const char* candidate : {"/usr/bin/promtool", "/usr/local/bin/promtool"}) {
    if (access(candidate, X_OK) == 0) promtool = candidate;
  }
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not installed (Debian package `prometheus`, see deploy/setup.sh): "
                    "the page's format was not checked by Prometheus's own linter";
  }
  const std::string path = testing::TempDir() + "/metrics.txt";
  { std::ofstream(path) << metrics.body; }
  testing::CommandResult check =
      testing::RunCommand({"/bin/sh", "-c", promtool + " check metrics < " + path});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out + check.err, "") << "promtool lint findings";
}

TEST_F(HttpApiTest, GrpcOverTcpWantsTheKeyTheUnixSocketDoesNot) {
  ASSERT_GT(daemon_->grpc_tcp_port(), 0);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", daemon_->grpc_tcp_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Waste::NewStub(channel);
  {
    grpc::ClientContext context;
    v1::GetStatsResponse response;
    grpc::Status status = stub->GetStats(&context, v1::GetStatsRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer wrong");
    v1::ListModelsResponse response;
    grpc::Status status = stub->ListModels(&context, v1::ListModelsRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kKey);
    v1::GenerateRequest request;
    request.set_model("stories260K");
    request.set_max_tokens(3);
    auto reader = stub->Generate(&context, request);
    v1::GenerateEvent event;
    int tokens = 0;
    while (reader->Read(&event)) tokens += event.has_token() ? 1 : 0;
    grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(tokens, 3);
  }
  {
    grpc::ClientContext context;  // Generate without the key.
    auto reader = stub->Generate(&context, v1::GenerateRequest());
    v1::GenerateEvent event;
    EXPECT_FALSE(reader->Read(&event));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // The harness's client is on the Unix socket, without a key.
  EXPECT_TRUE(daemon_->client().GetStats(v1::GetStatsRequest()).ok());
  // The client library (and so waste-client --api-key) sends it.
  const std::string tcp = absl::StrCat("127.0.0.1:", daemon_->grpc_tcp_port());
  EXPECT_TRUE(WasteClient::Connect(tcp, kKey)->GetStats(v1::GetStatsRequest()).ok());
  EXPECT_EQ(WasteClient::Connect(tcp)->GetStats(v1::GetStatsRequest()).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(HttpStartTest, ANonLoopbackAddressWithoutAKeyIsRefused) {
  for (const char* flag : {"--http-listen", "--listen"}) {
    testing::CommandResult result =
        testing::RunCommand({testing::RunfilePath("daemon/wasted"), "serve", "--socket",
                             testing::SocketDir() + "/w.sock", "--models-dir",
                             testing::ModelPath("stories260K"), flag, "0.0.0.0:0"});
    EXPECT_EQ(result.exit_code, 1) << flag;
    EXPECT_TRUE(absl::StrContains(result.err, "refusing to listen on 0.0.0.0:0 without an API key"))
        << result.err;
  }
}

}  // namespace
}  // namespace waste
