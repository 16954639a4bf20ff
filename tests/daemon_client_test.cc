// Starts the real wasted binary on a temporary socket and drives it through
// the client library and the waste-client binary.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/waste_client.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/subprocess.h"
#include "tests/testdata.h"

namespace waste {
namespace {

using grpc::health::v1::HealthCheckResponse;
using testing::CommandResult;
using testing::Process;
using testing::RunCommand;
using testing::RunfilePath;

std::string Wasted() { return RunfilePath("daemon/wasted"); }
std::string Client() { return RunfilePath("client/waste-client"); }

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    harness_ = std::make_unique<testing::DaemonHarness>(testing::ModelPath("stories260K"));
    absl::Status serving = harness_->WaitUntilServing();
    ASSERT_TRUE(serving.ok()) << serving;
    socket_ = harness_->socket();
    client_ = &harness_->client();
  }

  std::unique_ptr<testing::DaemonHarness> harness_;
  std::string socket_;
  WasteClient* client_ = nullptr;
};

TEST_F(DaemonTest, HealthIsServingAndSocketIsGroupOnly) {
  auto health = client_->Health();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthCheckResponse::SERVING);
  struct stat st;
  ASSERT_EQ(stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660);
}

TEST_F(DaemonTest, ListModelsThroughTheLibrary) {
  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->models_size(), 1);
  EXPECT_EQ(models->models(0).name(), "stories260K");
  EXPECT_EQ(models->models(0).size_bytes(), 1185376);
  EXPECT_TRUE(absl::EndsWith(models->models(0).path(), "stories260K/stories260K.gguf"));
  // From the GGUF header, without loading the model.
  EXPECT_FALSE(models->models(0).loaded());
  EXPECT_EQ(models->models(0).architecture(), "llama");
  EXPECT_EQ(models->models(0).quantization(), "F32");
  EXPECT_EQ(models->models(0).context_length(), 2048);
  EXPECT_GT(models->models(0).parameters(), 250000);
  EXPECT_EQ(models->models(0).unusable_reason(), "");
}

TEST_F(DaemonTest, CliHealthAndModels) {
  CommandResult health = RunCommand({Client(), "--socket", socket_, "health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");

  CommandResult models = RunCommand({Client(), "--socket", socket_, "models"});
  EXPECT_EQ(models.exit_code, 0) << models.err;
  EXPECT_TRUE(absl::StrContains(models.out, "stories260K")) << models.out;
  EXPECT_TRUE(absl::StrContains(models.out, "1185376")) << models.out;
  EXPECT_TRUE(absl::StrContains(models.out, "1.13 MiB")) << models.out;
}

// The reasoning controls reach the daemon: a model without a thinking switch
// (stories260K's plain template) answers as it would anyway; an effort that
// is not low/medium/high is refused, naming it.
TEST_F(DaemonTest, CliChatReasoningControls) {
  CommandResult off = RunCommand({Client(), "--socket", socket_, "chat", "--model", "stories260K",
                                  "--max-tokens", "4", "--no-think", "Hello"});
  EXPECT_EQ(off.exit_code, 0) << off.err;
  EXPECT_FALSE(off.out.empty());
  CommandResult bad = RunCommand({Client(), "--socket", socket_, "chat", "--model", "stories260K",
                                  "--reasoning-effort", "max", "Hello"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(bad.err, "reasoning_effort 'max'")) << bad.err;
}

TEST_F(DaemonTest, CliRunChatsOverAPipeInOneSession) {
  CommandResult run = RunCommand(
      {"/bin/sh", "-c",
       "printf 'Hello there\\n/unknown\\n/nothink\\nTell me a story\\n/bye\\nnot sent\\n' | " +
           Client() + " --socket " + socket_ + " run --max-tokens 8 stories260K"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "unknown command /unknown")) << run.err;
  EXPECT_FALSE(absl::StrContains(run.err, "unknown command /nothink")) << run.err;
  std::vector<std::string> answers = absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  EXPECT_EQ(answers.size(), 2u) << run.out;  // No prompt over a pipe; /bye ends.
  // The second turn continued the first one's session: its earlier tokens
  // came from the KV cache.
  const std::string log = harness_->process().Stderr();
  const size_t second = log.find("prompt tokens (", log.find("prompt tokens (") + 1);
  ASSERT_NE(second, std::string::npos) << log;
  EXPECT_NE(log.compare(second, 17, "prompt tokens (0 "), 0) << log.substr(second, 40);

  auto stats = client_->GetStats(v1::GetStatsRequest());
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->models_size(), 1);
  EXPECT_EQ(stats->models(0).requests(), 2);
}

TEST_F(DaemonTest, CliPsAndJsonOutputs) {
  CommandResult none = RunCommand({Client(), "--socket", socket_, "ps"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "no model is loaded\n");
  v1::LoadModelRequest load;
  load.set_model("stories260K");
  ASSERT_TRUE(client_->LoadModel(load).ok());
  CommandResult ps = RunCommand({Client(), "--socket", socket_, "ps"});
  EXPECT_EQ(ps.exit_code, 0) << ps.err;
  EXPECT_TRUE(absl::StrContains(ps.out, "stories260K")) << ps.out;
  EXPECT_TRUE(absl::StrContains(ps.out, "SESSIONS")) << ps.out;
  for (const std::string command : {"ps", "models", "stats"}) {
    CommandResult json = RunCommand({Client(), "--socket", socket_, command, "--json"});
    EXPECT_EQ(json.exit_code, 0) << command << ": " << json.err;
    EXPECT_TRUE(absl::StartsWith(json.out, "{")) << command << ": " << json.out;
    EXPECT_TRUE(absl::StrContains(json.out, "\"stories260K\"")) << command << ": " << json.out;
  }
  CommandResult plan = RunCommand({Client(), "--socket", socket_, "plan", "--json"});
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_TRUE(absl::StrContains(plan.out, "\"floor_bytes\"")) << plan.out;
  CommandResult bad = RunCommand({Client(), "--socket", socket_, "ps", "--jsn"});
  EXPECT_EQ(bad.exit_code, 2);
}

TEST_F(DaemonTest, CliReadsWasteAddress) {
  setenv("WASTE_ADDRESS", ("unix:" + socket_).c_str(), 1);
  CommandResult health = RunCommand({Client(), "health"});
  unsetenv("WASTE_ADDRESS");
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
}

TEST_F(DaemonTest, LoadAndUnloadAModel) {
  v1::UnloadModelRequest unload;
  unload.set_model("stories260K");
  EXPECT_EQ(client_->UnloadModel(unload).status().code(), absl::StatusCode::kNotFound);
  v1::LoadModelRequest load;
  load.set_model("stories260K");
  auto loaded = client_->LoadModel(load);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->model().loaded());
  EXPECT_EQ(loaded->model().architecture(), "llama");
  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok());
  EXPECT_TRUE(models->models(0).loaded());
  EXPECT_TRUE(client_->UnloadModel(unload).ok());
}

TEST_F(DaemonTest, SecondDaemonOnTheSameSocketIsRefused) {
  CommandResult second = RunCommand(
      {Wasted(), "serve", "--socket", socket_, "--models-dir", testing::ModelPath("stories260K")});
  EXPECT_NE(second.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(second.err, "is in use by another process")) << second.err;
  // The first daemon still serves.
  EXPECT_TRUE(client_->Health().ok());
}

TEST_F(DaemonTest, SigtermShutsDownGracefullyAndRemovesTheSocket) {
  EXPECT_EQ(harness_->process().Stop(SIGTERM), 0);
  EXPECT_NE(access(socket_.c_str(), F_OK), 0);
}

TEST(DaemonStartupTest, MissingModelsDirectoryIsAClearError) {
  std::string socket = testing::SocketDir() + "/w.sock";
  CommandResult result =
      RunCommand({Wasted(), "serve", "--socket", socket, "--models-dir", "/nonexistent/models"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(result.err, "models directory /nonexistent/models does not exist"))
      << result.err;
}

TEST(DaemonStartupTest, ModelDefaultFlagsAreTakenAndChecked) {
  std::string socket = testing::SocketDir() + "/w.sock";
  CommandResult bad = RunCommand({Wasted(), "serve", "--socket", socket, "--models-dir",
                                  testing::ModelPath("stories260K"), "--ram-budget", "lots"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err, "'lots' is not a byte size")) << bad.err;
  CommandResult policy = RunCommand({Wasted(), "serve", "--socket", socket, "--cache-policy",
                                     "fifo", "--ctx", "512", "--kv-type", "f32"});
  EXPECT_EQ(policy.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(policy.err, "--cache-policy must be lru or lfu")) << policy.err;
}

TEST(DaemonStartupTest, UnknownFlagIsAUsageError) {
  CommandResult result = RunCommand({Wasted(), "serve", "--sockt", "/tmp/x"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(result.err, "unknown flag --sockt")) << result.err;
}

TEST(DaemonStartupTest, OverlongSocketPathIsAClearError) {
  std::string socket = "/tmp/" + std::string(120, 's') + ".sock";
  CommandResult result = RunCommand(
      {Wasted(), "serve", "--socket", socket, "--models-dir", testing::ModelPath("stories260K")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(result.err, "the limit for Unix sockets")) << result.err;
}

TEST(DaemonStartupTest, SocketDirectoryIsPrivateAndAnOpenOneIsRefused) {
  // A directory wasted creates for its socket: owner and group only.
  const std::string base = testing::SocketDir();
  const std::string created = base + "/run/waste";
  {
    testing::Process daemon({Wasted(), "serve", "--socket", created + "/w.sock", "--models-dir",
                             testing::ModelPath("stories260K")});
    for (int i = 0; i < 200 && access((created + "/w.sock").c_str(), F_OK) != 0; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    struct stat st;
    ASSERT_EQ(stat(created.c_str(), &st), 0) << daemon.Stderr();
    EXPECT_EQ(st.st_mode & 0777, 0750);
    // (The socket can exist a moment before the signal handler does, so the
    // exit code is not the point here.)
    daemon.Stop(SIGTERM);
  }

  // One anybody may write to (and that lacks the sticky bit) is refused.
  const std::string open = base + "/open";
  ASSERT_EQ(mkdir(open.c_str(), 0777), 0);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  CommandResult result = RunCommand({Wasted(), "serve", "--socket", open + "/w.sock",
                                     "--models-dir", testing::ModelPath("stories260K")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(result.err, "writable by everyone")) << result.err;
}

TEST(DaemonStartupTest, SighupReloadsTheConfigForModelsLoadedAfterIt) {
  const std::string dir = testing::TempDir();
  const std::string config = dir + "/wasted.toml";
  auto write_config = [&](const std::string& body) {
    std::ofstream out(config);
    out << "models_dirs = [\"" << testing::ModelPath("stories260K") << "\"]\n" << body;
  };
  write_config("[model_defaults]\ncontext_length = 256\n");
  testing::DaemonHarness daemon(testing::ModelPath("stories260K"), {"--config", config});
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  auto context_of_next_load = [&] {
    v1::GenerateRequest request;
    request.set_model("stories260K");
    request.set_max_tokens(1);
    int context = 0;
    absl::Status status = daemon.client().Generate(request, [&](const v1::GenerateEvent& e) {
      if (e.has_started()) context = e.started().context_length();
      return true;
    });
    EXPECT_TRUE(status.ok()) << status;
    v1::UnloadModelRequest unload;
    unload.set_model("stories260K");
    EXPECT_TRUE(daemon.client().UnloadModel(unload).ok());
    return context;
  };
  EXPECT_EQ(context_of_next_load(), 256);

  write_config("[model_defaults]\ncontext_length = 128\n");
  ASSERT_EQ(kill(daemon.process().pid(), SIGHUP), 0);
  for (int i = 0; i < 100 && !absl::StrContains(daemon.process().Stderr(), "reloaded"); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(context_of_next_load(), 128);

  // A broken file is reported and the running configuration stays.
  write_config("[model_defaults]\ncontext_lenght = 64\n");
  ASSERT_EQ(kill(daemon.process().pid(), SIGHUP), 0);
  for (int i = 0; i < 100 && !absl::StrContains(daemon.process().Stderr(), "keeping"); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(absl::StrContains(daemon.process().Stderr(), "keeping the running configuration"))
      << daemon.process().Stderr();
  EXPECT_EQ(context_of_next_load(), 128);
}

TEST(NoDaemonTest, CliExitsNonZeroWithOneLineHint) {
  std::string socket = testing::SocketDir() + "/none.sock";
  CommandResult result = RunCommand({Client(), "--socket", socket, "health"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_TRUE(result.out.empty());
  std::vector<std::string> lines = absl::StrSplit(result.err, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u) << result.err;
  EXPECT_TRUE(absl::StrContains(lines[0], socket)) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], "wasted serve --socket " + socket)) << lines[0];
}

}  // namespace
}  // namespace waste
