// A conversation through the real daemon survives a restart: kept with
// --keep-session semantics (GenerateRequest.keep_session), the daemon stops
// (SIGTERM), a new daemon on the same state directory continues it with the
// same greedy tokens as a daemon that never stopped, computing only the new
// prompt tokens. SaveSession over RPC works on an open session.
#include <signal.h>

#include <filesystem>

#include "client/waste_client.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/testdata.h"

namespace waste {
namespace {

struct Turn {
  absl::Status status;
  std::string session;
  int cached = 0;
  std::vector<int32_t> ids;
};

Turn Generate(WasteClient& client, const std::string& prompt, const std::string& session,
              bool keep) {
  v1::GenerateRequest request;
  request.set_model("stories260K");
  request.set_prompt(prompt);
  request.set_max_tokens(16);
  request.set_stop_at_eos(false);
  request.set_session_id(session);
  request.set_keep_session(keep);
  Turn turn;
  turn.status = client.Generate(request, [&](const v1::GenerateEvent& event) {
    if (event.has_started()) {
      turn.session = event.started().session_id();
      turn.cached = event.started().cached_prompt_tokens();
    }
    if (event.has_token() && event.token().id() >= 0) turn.ids.push_back(event.token().id());
    return true;
  });
  return turn;
}

TEST(SessionRestartTest, AKeptSessionContinuesInARestartedDaemon) {
  const std::string models = testing::TempDir();
  std::filesystem::create_symlink(testing::ModelPath("stories260K/stories260K.gguf"),
                                  models + "/stories260K.gguf");
  // The model is a symlink to the shared fixtures, outside the models dir.
  const std::vector<std::string> flags = {"--kv-type", "f32", "--ctx", "256", "--follow-symlinks"};
  auto with_state = [&](const std::string& state) {
    std::vector<std::string> f = flags;
    f.insert(f.end(), {"--state-dir", state});
    return f;
  };

  std::vector<int32_t> expected;
  {
    testing::DaemonHarness daemon(models, with_state(testing::TempDir()));
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    Turn first = Generate(daemon.client(), "Lily", "", false);
    ASSERT_TRUE(first.status.ok()) << first.status;
    Turn second = Generate(daemon.client(), " and her mom", first.session, false);
    ASSERT_TRUE(second.status.ok()) << second.status;
    expected = second.ids;
  }

  const std::string state = testing::TempDir();
  std::string session;
  {
    testing::DaemonHarness daemon(models, with_state(state));
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    Turn first = Generate(daemon.client(), "Lily", "", /*keep=*/true);
    ASSERT_TRUE(first.status.ok()) << first.status;
    session = first.session;
    // Saving explicitly works too (and is overwritten at shutdown).
    v1::SaveSessionRequest save;
    save.set_model("stories260K");
    save.set_session_id(session);
    auto saved = daemon.client().SaveSession(save);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_GT(saved->tokens(), 16);
    EXPECT_TRUE(std::filesystem::exists(saved->path())) << saved->path();
    EXPECT_EQ(daemon.process().Stop(SIGTERM), 0);
  }

  testing::DaemonHarness restarted(models, with_state(state));
  ASSERT_TRUE(restarted.WaitUntilServing().ok());
  Turn second = Generate(restarted.client(), " and her mom", session, false);
  ASSERT_TRUE(second.status.ok()) << second.status;
  EXPECT_EQ(second.session, session);
  EXPECT_GT(second.cached, 16);
  EXPECT_EQ(second.ids, expected);

  Turn unknown = Generate(restarted.client(), "x", "s1-doesnotexist", false);
  EXPECT_EQ(unknown.status.code(), absl::StatusCode::kNotFound) << unknown.status;
}

}  // namespace
}  // namespace waste
