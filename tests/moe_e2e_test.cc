// A MoE model through the real daemon: streamed under a budget that holds a
// fraction of its experts, it generates the same tokens as fully resident,
// and a restarted daemon preloads the experts the first one found hot.
#include <signal.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "client/waste_client.h"
#include "daemon/tools/synthetic_model.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "tests/daemon_harness.h"
#include "tests/testdata.h"

namespace waste {
namespace {

std::vector<int32_t> Generate(WasteClient& client, absl::Status* status) {
  v1::GenerateRequest request;
  request.set_model("moe");
  request.set_prompt("the quick brown fox");
  request.set_max_tokens(24);
  request.set_stop_at_eos(false);
  std::vector<int32_t> ids;
  *status = client.Generate(request, [&](const v1::GenerateEvent& event) {
    if (event.has_token() && event.token().id() >= 0) ids.push_back(event.token().id());
    return true;
  });
  return ids;
}

TEST(MoeDaemonTest, StreamedExpertsMatchResidentAndRestartsWarm) {
  std::string models = testing::TempDir();
  std::string state = testing::TempDir();
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

  int64_t budget = 0;
  std::vector<int32_t> resident;
  {
    testing::DaemonHarness daemon(models, {"--state-dir", state, "--ctx", "256"});
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    absl::Status status;
    resident = Generate(daemon.client(), &status);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(resident.size(), 24u);
    v1::PlanRequest plan_request;
    plan_request.set_model("moe");
    auto plan = daemon.client().Plan(plan_request);
    ASSERT_TRUE(plan.ok()) << plan.status();
    // Room for the floor plus a few experts, far from all of them.
    budget = plan->plan().floor_bytes() +
             4 * (plan->plan().recommended_bytes() - plan->plan().floor_bytes()) / 16;
    ASSERT_LT(budget, plan->plan().recommended_bytes());
  }

  std::string budget_flag = std::to_string(budget);
  {
    testing::DaemonHarness daemon(
        models, {"--state-dir", state, "--ctx", "256", "--ram-budget", budget_flag});
    ASSERT_TRUE(daemon.WaitUntilServing().ok());
    absl::Status status;
    std::vector<int32_t> streamed = Generate(daemon.client(), &status);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(streamed, resident);
    auto stats = daemon.client().GetStats(v1::GetStatsRequest());
    ASSERT_TRUE(stats.ok());
    ASSERT_EQ(stats->models_size(), 1);
    EXPECT_GT(stats->models(0).totals().cache_misses(), 0);
    EXPECT_EQ(daemon.process().Stop(SIGTERM), 0);
    EXPECT_TRUE(absl::StrContains(daemon.process().Stderr(), "preloaded 0 hot experts"))
        << daemon.process().Stderr();
  }

  testing::DaemonHarness restarted(
      models, {"--state-dir", state, "--ctx", "256", "--ram-budget", budget_flag});
  ASSERT_TRUE(restarted.WaitUntilServing().ok());
  absl::Status status;
  EXPECT_EQ(Generate(restarted.client(), &status), resident);
  ASSERT_TRUE(status.ok()) << status;
  std::string log = restarted.process().Stderr();
  size_t at = log.find("preloaded ");
  ASSERT_NE(at, std::string::npos) << log;
  int preloaded = 0;
  ASSERT_TRUE(absl::SimpleAtoi(log.substr(at + 10, log.find(' ', at + 10) - at - 10), &preloaded));
  EXPECT_GT(preloaded, 0) << log;
}

}  // namespace
}  // namespace waste
