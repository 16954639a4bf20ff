// The soak's short form: a minute or so of mixed requests from four clients
// against one daemon streaming stories260K (WASTE_SOAK_SECONDS changes the
// measured time; the long form is the `soak` binary). No unexpected error,
// every greedy generation golden, the daemon's private RSS not growing
// grossly (the 2 % flatness check is the long form's, see below) and its
// peak under the budget plus the runtime reserve, and a clean exit.
#include "tests/soak/soak.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "tests/testdata.h"

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // ASan's shadow and quarantine own RSS.
#else
constexpr bool kSanitized = false;
#endif

namespace waste::soak {
namespace {

TEST(SoakTest, MixedRequestsFromConcurrentClientsStayCorrectAndFlat) {
  SoakOptions options;
  options.models_dir = testing::TempDir();
  std::filesystem::create_symlink(testing::ModelPath("stories260K/stories260K.gguf"),
                                  options.models_dir + "/stories260K.gguf");
  int seconds = kSanitized ? 30 : 60;
  if (const char* env = getenv("WASTE_SOAK_SECONDS")) (void)absl::SimpleAtoi(env, &seconds);
  options.duration = absl::Seconds(seconds);
  options.warmup = absl::Seconds(10);
  options.clients = 4;
  auto report = RunSoak(options);
  ASSERT_TRUE(report.ok()) << report.status();
  printf("%s", report->ToText().c_str());
  EXPECT_EQ(report->unexpected_errors, 0);
  EXPECT_GT(report->golden_checked, 10);
  EXPECT_EQ(report->golden_mismatches, 0);
  EXPECT_GT(report->bytes_read_per_token, 0);
  for (const char* op : {"generate_golden", "generate_sampled", "chat", "generate_cancelled",
                         "tokenize", "session_continue", "list_models", "load", "unload"}) {
    EXPECT_GT(report->ops[op].ok + report->ops[op].expected_errors, 0) << op << " never ran";
  }
  EXPECT_EQ(report->daemon_exit_code, 0);
  if (!kSanitized) {
    // The 2 % flatness criterion is the long form's (the `soak` binary
    // exits 1 past it): in its first ~20 minutes the daemon's private
    // memory grows by a few MiB as the allocator's arenas settle, so a
    // minute cannot tell flat from leaking. Here, a gross leak (KV caches,
    // a model copy or call buffers never freed: several MiB a minute) still
    // fails; ASan's leak checker runs this test in CI's sanitizer stage.
    EXPECT_LT(report->rss_drift, 1.0);
    EXPECT_LE(report->rss_peak, report->ram_budget_bytes + report->runtime_reserve_bytes);
  }
}

}  // namespace
}  // namespace waste::soak
