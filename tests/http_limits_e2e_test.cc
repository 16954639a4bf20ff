// The HTTP face's limits end to end, on a daemon configured tight: one
// request at a time and no queue (429), three connections (503), 4 KiB
// bodies (413), one-second header/body/idle timeouts, and a models
// directory holding a file that is not a model (500).
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/http_client.h"
#include "tests/http_daemon.h"
#include "tests/testdata.h"

namespace waste {
namespace {

using Json = nlohmann::json;
using testing::HttpCall;
using testing::HttpResponse;
using testing::RawConnection;

class HttpLimitsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = testing::TempDir();
    const std::string config = dir + "/wasted.toml";
    std::ofstream(config) << "http_max_connections = 3\n"
                             "http_max_body_bytes = \"4KiB\"\n"
                             "http_header_timeout_seconds = 1\n"
                             "http_body_timeout_seconds = 1\n"
                             "http_idle_timeout_seconds = 1\n";
    std::ofstream(dir + "/broken.gguf") << "GGUF but not really";
    daemon_ = new testing::HttpDaemon(
        testing::ModelPath("stories260K"),
        {"--config", config, "--models-dir", testing::ModelPath("stories260K"), "--models-dir", dir,
         "--max-concurrent-requests", "1", "--max-queued-requests", "0"});
    start_ = daemon_->Start();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_.ok()) << start_; }

  int port() const { return daemon_->http_port(); }

  HttpResponse Call(const std::string& method, const std::string& path,
                    const std::string& body = "") {
    absl::StatusOr<HttpResponse> response = HttpCall(port(), method, path, body);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.value_or(HttpResponse());
  }

  static std::string Code(const HttpResponse& response) {
    Json body = Json::parse(response.body, nullptr, false);
    if (!body.is_object() || !body.contains("error") || !body["error"]["code"].is_string()) {
      return "(no code) " + response.body;
    }
    return body["error"]["code"];
  }

  static std::unique_ptr<RawConnection> Connect(int port) {
    auto connection = RawConnection::Connect(port);
    EXPECT_TRUE(connection.ok()) << connection.status();
    return connection.ok() ? *std::move(connection) : nullptr;
  }

  static testing::HttpDaemon* daemon_;
  static absl::Status start_;
};

testing::HttpDaemon* HttpLimitsTest::daemon_ = nullptr;
absl::Status HttpLimitsTest::start_;

TEST_F(HttpLimitsTest, AFullQueueIs429) {
  // One long generation holds the only place in the batch.
  std::unique_ptr<RawConnection> busy = Connect(port());
  ASSERT_NE(busy, nullptr);
  const std::string body = R"({"model": "stories260K", "max_tokens": 100000, "stream": true})";
  ASSERT_TRUE(busy->Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                      "Content-Length: ",
                                      body.size(), "\r\n\r\n", body))
                  .ok());
  ASSERT_TRUE(absl::StrContains(busy->ReadUntil("data: {", absl::Seconds(60)), "data: {"));

  HttpResponse refused =
      Call("POST", "/v1/chat/completions",
           R"({"model": "stories260K", "messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(Code(refused), "queue_full");
  EXPECT_TRUE(absl::StrContains(refused.body, "rate_limit_error"));
  busy->Close();  // Cancels it; the model is free again.
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  int status = 0;
  while (absl::Now() < deadline && status != 200) {
    status = Call("POST", "/v1/completions", R"({"model": "stories260K", "max_tokens": 2})").status;
    if (status != 200) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(status, 200);
}

TEST_F(HttpLimitsTest, ConnectionsOverTheLimitGet503) {
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 3; ++i) held.push_back(Connect(port()));
  // Let the daemon accept them before the next one arrives.
  absl::SleepFor(absl::Milliseconds(200));
  HttpResponse refused = Call("GET", "/health");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(Code(refused), "too_many_connections");
  held.clear();
  // Idle connections are closed after the (1 s) timeout anyway; once these
  // are gone, new ones are served.
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  int status = 0;
  while (absl::Now() < deadline && status != 200) {
    status = Call("GET", "/health").status;
    if (status != 200) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(status, 200);
}

TEST_F(HttpLimitsTest, SlowAndIdleClientsAreDropped) {
  // Half a request line, then nothing: closed at the header timeout.
  std::unique_ptr<RawConnection> slow = Connect(port());
  ASSERT_TRUE(slow->Send("GET /health HTTP/1.1\r\nHost:").ok());
  absl::Time start = absl::Now();
  EXPECT_TRUE(slow->WaitForClose(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));

  // Headers, then a body that never comes: closed at the body timeout.
  std::unique_ptr<RawConnection> no_body = Connect(port());
  ASSERT_TRUE(no_body
                  ->Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                         "\r\n{\"pro")
                  .ok());
  EXPECT_TRUE(no_body->WaitForClose(absl::Seconds(10)));

  // Connected and silent: closed at the idle timeout.
  std::unique_ptr<RawConnection> idle = Connect(port());
  EXPECT_TRUE(idle->WaitForClose(absl::Seconds(10)));
}

TEST_F(HttpLimitsTest, BodyAndHeaderLimits) {
  HttpResponse big =
      Call("POST", "/v1/completions", R"({"prompt": ")" + std::string(8192, 'a') + R"("})");
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(Code(big), "request_too_large");

  // A chunked body has no Content-Length: it is cut off as it grows.
  std::unique_ptr<RawConnection> chunked = Connect(port());
  std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 8; ++i) request += "400\r\n" + std::string(1024, 'a') + "\r\n";
  (void)chunked->Send(request + "0\r\n\r\n");
  const std::string answer = chunked->ReadUntil("\r\n\r\n", absl::Seconds(10));
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 413 ")) << answer;

  HttpResponse headers =
      *HttpCall(port(), "GET", "/health", "", {{"X-Padding", std::string(20000, 'p')}});
  EXPECT_EQ(headers.status, 431);

  std::unique_ptr<RawConnection> garbage = Connect(port());
  ASSERT_TRUE(garbage->Send("NOT HTTP AT ALL\r\n\r\n").ok());
  EXPECT_TRUE(absl::StartsWith(garbage->ReadUntil("\r\n", absl::Seconds(10)), "HTTP/1.1 400 "));
}

TEST_F(HttpLimitsTest, AModelThatCannotLoadIs500) {
  HttpResponse broken = Call("POST", "/v1/completions", R"({"model": "broken", "prompt": "x"})");
  EXPECT_EQ(broken.status, 500) << broken.body;
  EXPECT_TRUE(absl::StrContains(broken.body, "server_error")) << broken.body;
  EXPECT_EQ(Call("GET", "/health").status, 200);
}

}  // namespace
}  // namespace waste
