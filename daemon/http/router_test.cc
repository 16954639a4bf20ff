// The endpoints through a fake Exchange, over an engine whose models
// directory holds no loadable model (generation end to end is in
// tests/http_e2e_test.cc).
#include "daemon/http/router.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "daemon/engine/model_catalog.h"
#include "gtest/gtest.h"
#include "storage/env.h"

namespace waste::http {
namespace {

class FakeExchange : public Exchange {
 public:
  void Post(std::function<void()> fn) override { fn(); }
  void Respond(int status, absl::string_view content_type, std::string body,
               const HttpHeaders&) override {
    ++answers;
    this->status = status;
    this->content_type = std::string(content_type);
    this->body = std::move(body);
  }
  void StartStream(absl::string_view) override { ++answers; }
  void Write(std::string data, std::function<void()> written) override {
    body += data;
    if (written) written();
  }
  void EndStream() override {}
  bool client_gone() const override { return false; }
  void OnClientGone(std::function<void()>) override {}

  int answers = 0;
  int status = 0;
  std::string content_type, body;
};

class RouterTest : public ::testing::Test {
 protected:
  RouterTest()
      : dir_(std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/router_test"),
        catalog_({dir_}) {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/tiny.gguf") << "not really a model";
    engine_ =
        std::make_unique<engine::Engine>(storage::Env::Default(), &catalog_, v1::DaemonConfig());
    router_ = std::make_unique<Router>(
        RouterContext{.engine = engine_.get(),
                      .metrics = &metrics_,
                      .pending = &pending_,
                      .api_key = "sk-test",
                      .run_blocking = [](std::function<void()> fn) { fn(); },
                      .started = absl::Now()});
  }

  std::shared_ptr<FakeExchange> Handle(const std::string& method, const std::string& path,
                                       const std::string& body = "") {
    auto exchange = std::make_shared<FakeExchange>();
    router_->Handle({.method = method, .path = path, .body = body}, exchange);
    return exchange;
  }

  std::string dir_;
  ModelCatalog catalog_;
  std::unique_ptr<engine::Engine> engine_;
  metrics::RequestMetrics metrics_;
  PendingSinks pending_;
  std::unique_ptr<Router> router_;
};

TEST_F(RouterTest, PrecheckRefusesUnknownPathsMethodsAndKeys) {
  auto refusal = router_->Precheck("GET", "/v2/nothing", "Bearer sk-test");
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->error.status, 404);
  refusal = router_->Precheck("GET", "/v1/chat/completions", "Bearer sk-test");
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->error.status, 405);
  EXPECT_EQ(refusal->headers, (HttpHeaders{{"Allow", "POST"}}));
  refusal = router_->Precheck("POST", "/v1/completions", "Bearer wrong");
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->error.status, 401);
  EXPECT_EQ(refusal->error.message, "incorrect API key");
  refusal = router_->Precheck("GET", "/metrics", "");
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->error.status, 401);
  EXPECT_TRUE(absl::StrContains(refusal->error.message, "Bearer"));
  EXPECT_FALSE(router_->Precheck("GET", "/health", "").has_value());  // Never needs the key.
  EXPECT_FALSE(router_->Precheck("GET", "/v1/models", "Bearer sk-test").has_value());
  EXPECT_FALSE(router_->Precheck("GET", "/v1/models/tiny", "Bearer sk-test").has_value());
  EXPECT_TRUE(router_->Precheck("GET", "/v1/models/", "Bearer sk-test").has_value());
}

TEST_F(RouterTest, EndpointLabelsAreAFixedSet) {
  EXPECT_EQ(Router::EndpointLabel("/v1/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(Router::EndpointLabel("/v1/models/anything"), "/v1/models/{id}");
  EXPECT_EQ(Router::EndpointLabel("/whatever/a/client/sends"), "other");
}

TEST_F(RouterTest, HealthAndDraining) {
  auto health = Handle("GET", "/health");
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, R"({"status":"ok"})");
  router_->set_draining();
  EXPECT_EQ(Handle("GET", "/health")->status, 503);
}

TEST_F(RouterTest, ModelsListEveryFile) {
  auto models = Handle("GET", "/v1/models");
  EXPECT_EQ(models->status, 200);
  EXPECT_TRUE(absl::StrContains(models->body, R"("object":"list")")) << models->body;
  EXPECT_TRUE(absl::StrContains(models->body, R"("id":"tiny")")) << models->body;
  EXPECT_EQ(Handle("GET", "/v1/models/tiny")->status, 200);
  EXPECT_EQ(Handle("GET", "/v1/models/nope")->status, 404);
}

TEST_F(RouterTest, CompletionErrors) {
  auto malformed = Handle("POST", "/v1/chat/completions", "{not json");
  EXPECT_EQ(malformed->status, 400);
  EXPECT_TRUE(absl::StrContains(malformed->body, "not valid JSON")) << malformed->body;
  auto unknown = Handle("POST", "/v1/completions", R"({"model": "nope", "prompt": "x"})");
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  EXPECT_TRUE(absl::StrContains(unknown->body, "nope")) << unknown->body;
  // A file that is not a model fails to load: a server-side error.
  auto broken = Handle("POST", "/v1/completions", R"({"model": "tiny", "prompt": "x"})");
  EXPECT_GE(broken->status, 400) << broken->body;
  EXPECT_EQ(broken->answers, 1);
  auto counters = metrics_.Snapshot();
  EXPECT_EQ((counters[""].requests[{"http", "not_found"}]), 1);
}

TEST_F(RouterTest, MetricsPage) {
  auto page = Handle("GET", "/metrics");
  EXPECT_EQ(page->status, 200);
  EXPECT_TRUE(absl::StartsWith(page->content_type, "text/plain; version=0.0.4"));
  EXPECT_TRUE(absl::StrContains(page->body, "# TYPE waste_requests_total counter"));
  EXPECT_TRUE(absl::StrContains(page->body, "waste_models_available 1\n")) << page->body;
  EXPECT_TRUE(absl::StrContains(page->body, "waste_models_loaded 0\n"));
}

}  // namespace
}  // namespace waste::http
