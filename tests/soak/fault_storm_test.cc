// Faults in the model file under a serving daemon.
//
// The storm: the soak's mixed requests (200 here; WASTE_STORM_REQUESTS
// changes it, e.g. 1000 by hand) against a daemon started with
// --inject-read-faults, where a fraction of the model's reads fail with EIO
// for some attempts (retried) or all of them, come back short or slow. Only
// requests whose reads failed after the retries may fail, with UNAVAILABLE
// naming the injected error; every request that succeeds is correct (the
// greedy ones golden), the request after a failure too; the daemon neither
// dies nor grows past its budget, and exits cleanly.
//
// And a model file truncated, then replaced, under the daemon: a clear error
// for the requests that needed the lost bytes, a clear refusal to load the
// truncated file, and the replacement loaded on its own identity.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "client/waste_client.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/soak/soak.h"
#include "tests/testdata.h"

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // ASan's shadow and quarantine own RSS.
#else
constexpr bool kSanitized = false;
#endif

namespace waste::soak {
namespace {

TEST(FaultStormTest, OnlyRequestsWhoseReadsFailedAfterRetriesFail) {
  SoakOptions options;
  options.models_dir = testing::TempDir();
  std::filesystem::create_symlink(testing::ModelPath("stories260K/stories260K.gguf"),
                                  options.models_dir + "/stories260K.gguf");
  options.max_requests = 200;
  if (const char* env = getenv("WASTE_STORM_REQUESTS")) {
    (void)absl::SimpleAtoi(env, &options.max_requests);
  }
  options.duration = absl::Minutes(20);  // The request count ends it.
  options.warmup = absl::ZeroDuration();
  options.clients = 4;
  // 1 % of the model's reads are faulty, and one in eight of those fails
  // every retry. At about 90 reads per request at this budget, one
  // generation in five or so meets such a read.
  options.read_fault_rate = 0.01;
  options.seed = 20241201;
  auto report = RunSoak(options);
  ASSERT_TRUE(report.ok()) << report.status();
  printf("%s", report->ToText().c_str());

  EXPECT_EQ(report->unexpected_errors, 0);
  EXPECT_EQ(report->golden_mismatches, 0);
  EXPECT_GT(report->golden_checked, 0);
  // The storm had teeth, and no request failed without a read that had
  // failed after its retries (a failed read fails one request at most:
  // steps of several sessions retry each alone).
  EXPECT_GT(report->reads_failed_after_retries, 0) << report->fault_summary;
  EXPECT_GT(report->injected_failures, 0);
  EXPECT_LE(report->injected_failures, report->reads_failed_after_retries) << report->fault_summary;
  // The request after each failure was correct (or failed by a fault too).
  EXPECT_GT(report->checks_after_failure, 0);
  EXPECT_EQ(report->correct_after_failure, report->checks_after_failure);
  EXPECT_EQ(report->daemon_exit_code, 0);
  if (!kSanitized) {
    EXPECT_LE(report->rss_peak, report->ram_budget_bytes + report->runtime_reserve_bytes);
  }
}

struct Result {
  absl::Status status;
  std::vector<int32_t> ids;
};

Result Greedy(WasteClient& client, int max_tokens) {
  v1::GenerateRequest request;
  request.set_model("stories260K");
  request.set_max_tokens(max_tokens);
  request.set_stop_at_eos(false);
  Result r;
  r.status = client.Generate(request, [&](const v1::GenerateEvent& event) {
    if (event.has_token() && event.token().id() >= 0) r.ids.push_back(event.token().id());
    return true;
  });
  return r;
}

TEST(FaultStormTest, AModelFileTruncatedThenReplacedUnderTheDaemon) {
  const std::string fixture = testing::ModelPath("stories260K/stories260K.gguf");
  const std::string models = testing::TempDir();
  const std::string path = models + "/stories260K.gguf";
  std::filesystem::copy_file(fixture, path);
  const uint64_t size = std::filesystem::file_size(path);
  const std::vector<std::string> flags = {"--ctx", "512", "--threads", "1"};
  int64_t floor = 0;
  {
    testing::DaemonHarness probe(models, flags);
    ASSERT_TRUE(probe.WaitUntilServing().ok());
    v1::PlanRequest plan;
    plan.set_model("stories260K");
    auto planned = probe.client().Plan(plan);
    ASSERT_TRUE(planned.ok()) << planned.status();
    floor = planned->plan().floor_bytes();
  }
  std::vector<std::string> streamed = flags;
  streamed.insert(streamed.end(), {"--ram-budget", std::to_string(floor)});
  testing::DaemonHarness daemon(models, streamed);
  ASSERT_TRUE(daemon.WaitUntilServing().ok());
  Result first = Greedy(daemon.client(), 256);
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_EQ(first.ids, testing::StoriesGoldenIds());

  // Truncated in place: the streamed weights are gone.
  std::filesystem::resize_file(path, size / 4);
  Result lost = Greedy(daemon.client(), 8);
  EXPECT_FALSE(lost.status.ok());
  // Either the loaded copy met the missing bytes, or the engine saw the
  // change first and refused to load the truncated file; both name it.
  EXPECT_TRUE(absl::StrContains(lost.status.message(), path)) << lost.status;
  Result refused = Greedy(daemon.client(), 8);
  EXPECT_FALSE(refused.status.ok());
  EXPECT_TRUE(absl::StrContains(refused.status.message(), path)) << refused.status;

  // Replaced by a whole file: served from it, golden again.
  std::filesystem::copy_file(fixture, path + ".new");
  std::filesystem::rename(path + ".new", path);
  Result again = Greedy(daemon.client(), 256);
  ASSERT_TRUE(again.status.ok()) << again.status;
  EXPECT_EQ(again.ids, testing::StoriesGoldenIds());

  EXPECT_EQ(daemon.process().Stop(SIGTERM), 0);
  const std::string log = daemon.process().Stderr();
  EXPECT_TRUE(absl::StrContains(log, "changed since stories260K was loaded")) << log;
}

}  // namespace
}  // namespace waste::soak
