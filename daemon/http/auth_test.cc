#include "daemon/http/auth.h"

#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace waste::http {
namespace {

TEST(AuthTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("sk-abc", "sk-abc"));
  EXPECT_FALSE(ConstantTimeEquals("sk-abc", "sk-abd"));
  EXPECT_FALSE(ConstantTimeEquals("sk-abc", "sk-ab"));
  EXPECT_FALSE(ConstantTimeEquals("sk-ab", "sk-abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  // A prefix padded with NULs is not the key.
  EXPECT_FALSE(ConstantTimeEquals(std::string("ab\0", 3), "ab"));
}

TEST(AuthTest, BearerTokens) {
  EXPECT_EQ(BearerToken("Bearer sk-1").value_or("?"), "sk-1");
  EXPECT_EQ(BearerToken("bearer   sk-1  ").value_or("?"), "sk-1");
  EXPECT_FALSE(BearerToken("Basic dXNlcjpwYXNz").has_value());
  EXPECT_FALSE(BearerToken("Bearer").has_value());
  EXPECT_FALSE(BearerToken("").has_value());
}

TEST(AuthTest, Authorized) {
  EXPECT_TRUE(Authorized("", ""));
  EXPECT_TRUE(Authorized("", "Bearer anything"));
  EXPECT_TRUE(Authorized("k1", "Bearer k1"));
  EXPECT_FALSE(Authorized("k1", "Bearer k2"));
  EXPECT_FALSE(Authorized("k1", ""));
  EXPECT_FALSE(Authorized("k1", "k1"));
}

TEST(AuthTest, SplitHostPort) {
  auto a = SplitHostPort("127.0.0.1:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  auto b = SplitHostPort("[::1]:0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 0);
  auto c = SplitHostPort(":9");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "");
  EXPECT_FALSE(SplitHostPort("localhost").ok());
  EXPECT_FALSE(SplitHostPort("h:99999").ok());
  EXPECT_FALSE(SplitHostPort("[::1]8080").ok());
}

TEST(AuthTest, LoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackListen("127.0.0.1:8080"));
  EXPECT_TRUE(IsLoopbackListen("127.1.2.3:1"));
  EXPECT_TRUE(IsLoopbackListen("localhost:8080"));
  EXPECT_TRUE(IsLoopbackListen("[::1]:8080"));
  EXPECT_TRUE(IsLoopbackListen("[::ffff:127.0.0.1]:8080"));
  EXPECT_FALSE(IsLoopbackListen("0.0.0.0:8080"));
  EXPECT_FALSE(IsLoopbackListen("[::]:8080"));
  EXPECT_FALSE(IsLoopbackListen(":8080"));
  EXPECT_FALSE(IsLoopbackListen("192.168.1.5:8080"));
  EXPECT_FALSE(IsLoopbackListen("example.com:8080"));
}

TEST(AuthTest, RemoteListenersNeedAKey) {
  v1::DaemonConfig config;
  config.set_http_listen("127.0.0.1:8080");
  config.set_listen("localhost:7420");
  EXPECT_TRUE(CheckRemoteListenersHaveKey(config, "").ok());
  config.set_http_listen("0.0.0.0:8080");
  absl::Status refused = CheckRemoteListenersHaveKey(config, "");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.message(), "0.0.0.0:8080")) << refused;
  EXPECT_TRUE(CheckRemoteListenersHaveKey(config, "key").ok());
  config.set_allow_unauthenticated_remote(true);
  EXPECT_TRUE(CheckRemoteListenersHaveKey(config, "").ok());
  config.set_allow_unauthenticated_remote(false);
  config.set_http_listen("");
  config.set_listen("10.0.0.1:7420");  // gRPC over TCP too.
  EXPECT_FALSE(CheckRemoteListenersHaveKey(config, "").ok());
}

TEST(AuthTest, LoadApiKey) {
  v1::DaemonConfig config;
  EXPECT_EQ(LoadApiKey(config).value_or("?"), "");
  config.set_api_key(" sk-direct ");
  EXPECT_EQ(LoadApiKey(config).value_or("?"), "sk-direct");

  const std::string path =
      std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/api_key_test.txt";
  std::ofstream(path) << "sk-from-file\nsecond line ignored\n";
  config.set_api_key_file(path);
  EXPECT_FALSE(LoadApiKey(config).ok());  // Both set.
  config.clear_api_key();
  EXPECT_EQ(LoadApiKey(config).value_or("?"), "sk-from-file");
  std::ofstream(path) << "\n";
  EXPECT_FALSE(LoadApiKey(config).ok());
  config.set_api_key_file(path + ".missing");
  absl::StatusOr<std::string> missing = LoadApiKey(config);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), ".missing"));
}

}  // namespace
}  // namespace waste::http
