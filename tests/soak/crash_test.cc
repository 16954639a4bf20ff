// kill -9 at random points: while generating, while saving sessions (the
// SaveSession RPC, and unloads of models that keep sessions), and while
// saving the expert hotlist. Every time the daemon restarts cleanly on the
// same state directory, no temporary file survives the restart, every state
// file on disk is usable (each is its old or its new version: written to a
// temporary file, fsynced, renamed; checksummed), and generation is correct.
// A corrupt state file is ignored with a warning.
//
// WASTE_CRASH_ROUNDS sets the number of kills per test (default 4).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "client/waste_client.h"
#include "daemon/tools/synthetic_model.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "tests/daemon_harness.h"
#include "tests/testdata.h"

namespace waste {
namespace {

namespace fs = std::filesystem;

int Rounds() {
  int rounds = 4;
  if (const char* env = getenv("WASTE_CRASH_ROUNDS")) (void)absl::SimpleAtoi(env, &rounds);
  return rounds;
}

// Files under `dir` whose name has ".tmp." (a write in progress).
std::vector<std::string> TemporaryFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && absl::StrContains(it->path().filename().string(), ".tmp.")) {
      out.push_back(it->path().string());
    }
  }
  return out;
}

// The ids of the saved sessions under a state directory.
std::vector<std::string> SavedSessions(const std::string& state) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(state + "/sessions", ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && it->path().extension() == ".session") {
      ids.push_back(it->path().stem().string());
    }
  }
  return ids;
}

struct Result {
  absl::Status status;
  std::string session;
  std::vector<int32_t> ids;
};

Result Generate(WasteClient& client, const std::string& model, const std::string& prompt,
                int max_tokens, const std::string& session = "", bool keep = false) {
  v1::GenerateRequest request;
  request.set_model(model);
  request.set_prompt(prompt);
  request.set_max_tokens(max_tokens);
  request.set_stop_at_eos(false);
  request.set_session_id(session);
  request.set_keep_session(keep);
  request.mutable_sampling()->set_temperature(0);
  Result r;
  r.status = client.Generate(request, [&](const v1::GenerateEvent& event) {
    if (event.has_started()) r.session = event.started().session_id();
    if (event.has_token() && event.token().id() >= 0) r.ids.push_back(event.token().id());
    return true;
  });
  return r;
}

// What a restarted daemon must show: it serves, it removed every temporary
// file, it warned of no corrupt state.
void ExpectCleanRestart(testing::DaemonHarness& daemon, const std::string& state) {
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Stderr();
  EXPECT_TRUE(TemporaryFiles(state).empty()) << TemporaryFiles(state)[0];
  const std::string log = daemon.process().Stderr();
  for (const char* bad : {"corrupt", "cannot restore", "checksum"}) {
    EXPECT_FALSE(absl::StrContains(log, bad)) << bad << " in\n" << log;
  }
}

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    models_ = testing::TempDir();
    state_ = testing::TempDir();
    fs::create_symlink(testing::ModelPath("stories260K/stories260K.gguf"),
                       models_ + "/stories260K.gguf");
  }

  std::vector<std::string> Flags(const std::vector<std::string>& more = {}) const {
    std::vector<std::string> flags = {"--follow-symlinks", "--state-dir", state_, "--threads", "1",
                                      "--kv-type",         "f32"};
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
  }

  std::string models_;
  std::string state_;
  std::mt19937_64 rng_{20241201};
};

TEST_F(CrashTest, KillDuringGenerationRestartsCleanly) {
  std::map<std::string, std::string> continuation;  // Reference tokens by prompt.
  for (int round = 0; round < Rounds(); ++round) {
    SCOPED_TRACE(round);
    {
      testing::DaemonHarness daemon(models_, Flags({"--ctx", "512"}));
      ASSERT_TRUE(daemon.WaitUntilServing().ok());
      std::atomic<bool> dead{false};
      std::vector<std::thread> clients;
      for (int c = 0; c < 3; ++c) {
        clients.emplace_back([&, c] {
          auto client = WasteClient::Connect("unix:" + daemon.socket());
          while (!dead.load()) {
            Result r = Generate(*client, "stories260K", c == 0 ? "" : "Lily", 64 + 32 * c, "",
                                /*keep=*/c == 2);
            if (!r.status.ok()) break;
          }
        });
      }
      absl::SleepFor(absl::Milliseconds(300 + static_cast<int>(rng_() % 1500)));
      EXPECT_EQ(daemon.process().Stop(SIGKILL), 128 + SIGKILL);
      dead.store(true);
      for (std::thread& t : clients) t.join();
    }
    testing::DaemonHarness restarted(models_, Flags({"--ctx", "512"}));
    ExpectCleanRestart(restarted, state_);
    Result golden = Generate(restarted.client(), "stories260K", "", 256);
    ASSERT_TRUE(golden.status.ok()) << golden.status;
    EXPECT_EQ(golden.ids, testing::StoriesGoldenIds());
    // Sessions kept before the kill and saved (none may be: a kill loses
    // what was not saved yet, by design) continue.
    for (const std::string& id : SavedSessions(state_)) {
      Result next = Generate(restarted.client(), "stories260K", " and", 8, id);
      EXPECT_TRUE(next.status.ok()) << id << ": " << next.status;
    }
    EXPECT_EQ(restarted.process().Stop(SIGTERM), 0) << restarted.process().Stderr();
  }
}

// Sessions of ~1,500 tokens (f32 KV: ~4 MB a file) saved over and over by
// the SaveSession RPC and by unloads, killed at random: most kills land
// inside a write. After each kill every session restores (whichever version
// its file holds) and continues.
TEST_F(CrashTest, KillDuringSessionSavingLeavesOldOrNewFiles) {
  const std::vector<std::string> flags = Flags({"--ctx", "2048"});
  std::vector<std::string> sessions;
  {
    testing::DaemonHarness daemon(models_, flags);
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    for (int s = 0; s < 3; ++s) {
      Result r = Generate(daemon.client(), "stories260K", "Once upon a time", 1500, "", true);
      ASSERT_TRUE(r.status.ok()) << r.status;
      sessions.push_back(r.session);
    }
    EXPECT_EQ(daemon.process().Stop(SIGTERM), 0);  // Saves the kept sessions.
  }
  ASSERT_EQ(SavedSessions(state_).size(), 3u);

  int mid_write = 0;
  for (int round = 0; round < Rounds(); ++round) {
    SCOPED_TRACE(round);
    {
      testing::DaemonHarness daemon(models_, flags);
      ASSERT_TRUE(daemon.WaitUntilServing().ok());
      std::atomic<bool> dead{false};
      std::vector<std::thread> savers;
      for (int c = 0; c < 3; ++c) {
        savers.emplace_back([&, c] {
          auto client = WasteClient::Connect("unix:" + daemon.socket());
          bool open = false;
          while (!dead.load()) {
            if (!open) {  // Restore it (reads the file) with one more token.
              Result touch = Generate(*client, "stories260K", " and", 1, sessions[c]);
              if (touch.status.code() == absl::StatusCode::kUnavailable) break;
              open = touch.status.ok();
              continue;
            }
            v1::SaveSessionRequest save;
            save.set_model("stories260K");
            save.set_session_id(sessions[c]);
            auto saved = client->SaveSession(save);
            if (!saved.ok() && saved.status().code() == absl::StatusCode::kUnavailable) break;
            open = saved.ok();  // NOT_FOUND: an unload closed it (and saved it).
            if (c == 2) {       // Unloading saves every kept session.
              v1::UnloadModelRequest unload;
              unload.set_model("stories260K");
              (void)client->UnloadModel(unload);
              open = false;
            }
          }
        });
      }
      absl::SleepFor(absl::Milliseconds(500 + static_cast<int>(rng_() % 1500)));
      EXPECT_EQ(daemon.process().Stop(SIGKILL), 128 + SIGKILL);
      dead.store(true);
      mid_write += !TemporaryFiles(state_).empty();
      for (std::thread& t : savers) t.join();
    }
    testing::DaemonHarness restarted(models_, flags);
    ExpectCleanRestart(restarted, state_);
    ASSERT_EQ(SavedSessions(state_).size(), 3u);
    for (const std::string& id : sessions) {
      Result next = Generate(restarted.client(), "stories260K", " The end.", 16, id);
      ASSERT_TRUE(next.status.ok()) << id << ": " << next.status;
      EXPECT_EQ(next.ids.size(), 16u);
    }
    // Killed, not stopped: what was just generated is not saved, and the
    // files stay as the crash left them for the next round.
    EXPECT_EQ(restarted.process().Stop(SIGKILL), 128 + SIGKILL);
  }
  printf("%d of %d kills landed while a session file was being written\n", mid_write, Rounds());
}

TEST_F(CrashTest, KillDuringHotlistSavingRestartsWarm) {
  const std::string models = testing::TempDir();
  tools::MkModelOptions options;
  options.arch = tools::SyntheticArch::kQwen3Moe;
  options.out = models + "/moe.gguf";
  options.dim = 256;
  options.layers = 4;
  options.heads = 4;
  options.kv_heads = 2;
  options.experts = 16;
  options.experts_used = 2;
  options.expert_ffn = 256;
  options.type = storage::GgmlType::kQ8_0;
  options.seed = 11;
  auto written = tools::WriteSyntheticModel(options, storage::Env::Default());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  std::vector<std::string> flags = {"--state-dir", state_, "--ctx", "256", "--threads", "1"};
  std::vector<int32_t> reference;
  int64_t budget = 0;
  {
    testing::DaemonHarness daemon(models, flags);
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    Result r = Generate(daemon.client(), "moe", "the quick brown fox", 24);
    ASSERT_TRUE(r.status.ok()) << r.status;
    reference = r.ids;
    v1::PlanRequest plan_request;
    plan_request.set_model("moe");
    auto plan = daemon.client().Plan(plan_request);
    ASSERT_TRUE(plan.ok()) << plan.status();
    budget = plan->plan().floor_bytes() +
             4 * (plan->plan().recommended_bytes() - plan->plan().floor_bytes()) / 16;
  }
  flags.insert(flags.end(), {"--ram-budget", std::to_string(budget)});

  int mid_write = 0;
  for (int round = 0; round < Rounds(); ++round) {
    SCOPED_TRACE(round);
    {
      testing::DaemonHarness daemon(models, flags);
      ASSERT_TRUE(daemon.WaitUntilServing().ok());
      std::atomic<bool> dead{false};
      std::vector<std::thread> clients;
      // Short requests one after another: the hotlist is saved each time
      // the batch empties, and at every unload.
      for (int c = 0; c < 2; ++c) {
        clients.emplace_back([&, c] {
          auto client = WasteClient::Connect("unix:" + daemon.socket());
          const char* prompts[] = {"the quick brown fox", "jumps over", "the lazy dog"};
          for (int i = 0; !dead.load(); ++i) {
            Result r = Generate(*client, "moe", prompts[(i + c) % 3], 2);
            if (!r.status.ok()) break;
            if (c == 1 && i % 5 == 4) {
              v1::UnloadModelRequest unload;
              unload.set_model("moe");
              (void)client->UnloadModel(unload);
            }
          }
        });
      }
      absl::SleepFor(absl::Milliseconds(500 + static_cast<int>(rng_() % 1500)));
      EXPECT_EQ(daemon.process().Stop(SIGKILL), 128 + SIGKILL);
      dead.store(true);
      mid_write += !TemporaryFiles(state_).empty();
      for (std::thread& t : clients) t.join();
    }
    testing::DaemonHarness restarted(models, flags);
    ExpectCleanRestart(restarted, state_);
    Result r = Generate(restarted.client(), "moe", "the quick brown fox", 24);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.ids, reference);
    const std::string log = restarted.process().Stderr();
    EXPECT_TRUE(absl::StrContains(log, "preloaded ")) << log;
    EXPECT_FALSE(absl::StrContains(log, "cold expert cache")) << log;
    EXPECT_EQ(restarted.process().Stop(SIGTERM), 0);
  }
  printf("%d of %d kills landed while the hotlist was being written\n", mid_write, Rounds());

  // A corrupt hotlist: a warning, a cold start, the same tokens.
  std::vector<std::string> hotlists;
  for (auto& entry : fs::directory_iterator(state_)) {
    if (absl::StartsWith(entry.path().filename().string(), "hotlist-")) {
      hotlists.push_back(entry.path().string());
    }
  }
  ASSERT_EQ(hotlists.size(), 1u);
  std::ofstream(hotlists[0], std::ios::app) << "999 7 blk.0.ffn_up_exps.999\n";
  testing::DaemonHarness restarted(models, flags);
  ASSERT_TRUE(restarted.WaitUntilServing().ok());
  Result r = Generate(restarted.client(), "moe", "the quick brown fox", 24);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.ids, reference);
  const std::string log = restarted.process().Stderr();
  EXPECT_TRUE(absl::StrContains(log, "is corrupt")) << log;
  EXPECT_TRUE(absl::StrContains(log, "starting with a cold expert cache")) << log;
}

// Flipped bytes in a session file and a hotlist, a truncated session file,
// and a dead writer's temporary file: the daemon starts, says what it
// ignores, and serves.
TEST_F(CrashTest, CorruptStateFilesAreIgnoredWithAWarning) {
  const std::vector<std::string> flags = Flags({"--ctx", "512"});
  std::string flipped, truncated;
  {
    testing::DaemonHarness daemon(models_, flags);
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    Result a = Generate(daemon.client(), "stories260K", "Lily", 32, "", true);
    Result b = Generate(daemon.client(), "stories260K", "Tom", 32, "", true);
    ASSERT_TRUE(a.status.ok() && b.status.ok());
    flipped = a.session;
    truncated = b.session;
    EXPECT_EQ(daemon.process().Stop(SIGTERM), 0);
  }
  std::string flipped_path, truncated_path;
  for (auto& entry : fs::recursive_directory_iterator(state_)) {
    if (entry.path().stem() == flipped) flipped_path = entry.path().string();
    if (entry.path().stem() == truncated) truncated_path = entry.path().string();
  }
  ASSERT_FALSE(flipped_path.empty());
  ASSERT_FALSE(truncated_path.empty());
  {
    std::fstream f(flipped_path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(fs::file_size(flipped_path) / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(fs::file_size(flipped_path) / 2));
    c ^= 0x40;
    f.write(&c, 1);
  }
  fs::resize_file(truncated_path, fs::file_size(truncated_path) / 2);
  // A temporary file whose writer is gone (a pid over any pid_max).
  const std::string stale =
      fs::path(truncated_path).parent_path().string() + "/x.session.tmp.999999999";
  std::ofstream(stale) << "partial";

  testing::DaemonHarness daemon(models_, flags);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  EXPECT_FALSE(fs::exists(stale));
  for (const std::string& id : {flipped, truncated}) {
    Result r = Generate(daemon.client(), "stories260K", " and", 8, id);
    EXPECT_EQ(r.status.code(), absl::StatusCode::kNotFound) << r.status;
    EXPECT_TRUE(absl::StrContains(r.status.message(), "could not be restored")) << r.status;
  }
  Result golden = Generate(daemon.client(), "stories260K", "", 256);
  ASSERT_TRUE(golden.status.ok()) << golden.status;
  EXPECT_EQ(golden.ids, testing::StoriesGoldenIds());
  EXPECT_EQ(daemon.process().Stop(SIGTERM), 0);
  const std::string log = daemon.process().Stderr();
  EXPECT_TRUE(absl::StrContains(log, "checksum mismatch")) << log;
  EXPECT_TRUE(absl::StrContains(log, "truncated")) << log;
  EXPECT_TRUE(absl::StrContains(log, "removed 1 temporary file")) << log;
}

}  // namespace
}  // namespace waste
