#include "daemon/config/config.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace waste {
namespace {

TEST(ParseDaemonConfigTest, ReadsEveryKindOfField) {
  auto config = ParseDaemonConfig(R"(
socket = "/tmp/w.sock"
listen = "127.0.0.1:7420"
models_dirs = ["/models", "/more"]
log_level = "debug"
max_concurrent_requests = 2

[model_defaults]
ram_budget = "8GiB"
context_length = 4096
cache_policy = "lfu"
kv_cache_type = "f32"
direct_io = true
keep_alive = -1

[models.stories260K]
ram_budget = 67108864
prefetch_depth = 3
)",
                                  "test.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->socket(), "/tmp/w.sock");
  EXPECT_EQ(config->listen(), "127.0.0.1:7420");
  ASSERT_EQ(config->models_dirs_size(), 2);
  EXPECT_EQ(config->models_dirs(1), "/more");
  EXPECT_EQ(config->max_concurrent_requests(), 2);
  EXPECT_EQ(config->model_defaults().ram_budget_bytes(), 8LL << 30);
  EXPECT_EQ(config->model_defaults().cache_policy(), v1::CACHE_POLICY_LFU);
  EXPECT_EQ(config->model_defaults().kv_cache_type(), v1::KV_CACHE_TYPE_F32);
  EXPECT_EQ(config->model_defaults().keep_alive_seconds(), -1);
  ASSERT_EQ(config->models().count("stories260K"), 1u);
  const v1::ModelConfig& model = config->models().at("stories260K");
  EXPECT_EQ(model.ram_budget_bytes(), 64 << 20);
  EXPECT_EQ(model.prefetch_depth(), 3);

  v1::ModelConfig merged = MergeModelConfig(config->model_defaults(), model);
  EXPECT_EQ(merged.ram_budget_bytes(), 64 << 20);
  EXPECT_EQ(merged.context_length(), 4096);
  EXPECT_EQ(merged.cache_policy(), v1::CACHE_POLICY_LFU);
}

TEST(ParseDaemonConfigTest, RefusesTyposAndBadValuesNamingTheLine) {
  auto unknown = ParseDaemonConfig("socket = \"/a\"\nsokcet = \"/b\"\n", "w.toml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "w.toml:2: unknown key 'sokcet'");

  auto wrong_type = ParseDaemonConfig("[model_defaults]\ncontext_length = \"big\"\n", "w.toml");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.status().message(),
            "w.toml:2: model_defaults.context_length must be an integer");

  auto bad_enum = ParseDaemonConfig("[model_defaults]\ncache_policy = \"fifo\"\n", "w.toml");
  ASSERT_FALSE(bad_enum.ok());
  EXPECT_EQ(bad_enum.status().message(),
            "w.toml:2: model_defaults.cache_policy = \"fifo\" is not one of: lru, lfu");

  auto syntax = ParseDaemonConfig("socket = \n", "w.toml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_TRUE(absl::StartsWith(syntax.status().message(), "w.toml:1:"))
      << syntax.status().message();
}

TEST(LoadDaemonConfigTest, TheShippedExampleParses) {
  auto config = LoadDaemonConfig("deploy/wasted.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->socket(), "/run/waste/wasted.sock");
  EXPECT_EQ(config->model_defaults().ram_budget_bytes(), 16LL << 30);
  EXPECT_EQ(config->models().at("DeepSeek-V3-Q2_K").context_length(), 8192);
  EXPECT_EQ(config->http_listen(), "");  // Off unless set.
  EXPECT_EQ(config->http_max_body_bytes(), 1 << 20);
  EXPECT_EQ(config->http_max_connections(), 256);
}

TEST(ParseDaemonConfigTest, HttpAndApiKeyFields) {
  auto config = ParseDaemonConfig(
      "http_listen = \"0.0.0.0:8080\"\napi_key_file = \"/etc/waste/key\"\n"
      "allow_unauthenticated_remote = false\nhttp_max_body_bytes = \"64KiB\"\n"
      "http_idle_timeout_seconds = 5\n",
      "w.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->http_listen(), "0.0.0.0:8080");
  EXPECT_EQ(config->api_key_file(), "/etc/waste/key");
  EXPECT_FALSE(config->allow_unauthenticated_remote());
  EXPECT_EQ(config->http_max_body_bytes(), 64 << 10);
  EXPECT_EQ(config->http_idle_timeout_seconds(), 5);
  EXPECT_FALSE(config->has_http_max_connections());
}

TEST(ApplyDaemonDefaultsTest, FillsSocketAndLogLevel) {
  v1::DaemonConfig config;
  ApplyDaemonDefaults(&config);
  EXPECT_FALSE(config.socket().empty());
  EXPECT_EQ(config.log_level(), "info");
  EXPECT_EQ(config.max_concurrent_requests(), 4);
  EXPECT_FALSE(config.state_dir().empty());
}

}  // namespace
}  // namespace waste

namespace waste {
namespace {

TEST(ParseDaemonConfigTest, VramBudgetTakesASizeOrBytes) {
  auto config = ParseDaemonConfig(R"(
[model_defaults]
vram_budget = "6GiB"

[models.big]
vram_budget_bytes = 1073741824
)",
                                  "test.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model_defaults().vram_budget_bytes(), 6LL << 30);
  EXPECT_EQ(config->models().at("big").vram_budget_bytes(), 1LL << 30);
  EXPECT_FALSE(ParseDaemonConfig("[model_defaults]\nvram_budget = \"lots\"\n", "w.toml").ok());
}

}  // namespace
}  // namespace waste
