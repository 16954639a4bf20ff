#include "daemon/bench/commands.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "daemon/bench/memory_bandwidth.h"
#include "daemon/kernels/cpu_features.h"
#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace waste::bench {
namespace {

using Json = nlohmann::ordered_json;

std::string Stories() { return testing::ModelPath("stories260K/stories260K.gguf"); }

TEST(PlanCommandTest, PrintsFloorRecommendedAndTheSplit) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunPlan({Stories(), "--ram-budget", "65MiB", "--ctx", "256"}), 0);
  std::string out = ::testing::internal::GetCapturedStdout();
  for (const char* part : {"floor:", "recommended:", "pinned:", "streaming:", "per token:"}) {
    EXPECT_NE(out.find(part), std::string::npos) << part << " not in:\n" << out;
  }
}

TEST(PlanCommandTest, JsonAndRefusalUnderTheFloor) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunPlan({Stories(), "--ram-budget", "1MiB", "--json"}), 1);
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("\"ok\": false"), std::string::npos) << out;
  EXPECT_NE(out.find("is under this model's floor"), std::string::npos) << out;
  const Json doc = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << out;
  EXPECT_EQ(doc.begin().key(), "model");  // Keys in the order written.
  EXPECT_EQ(doc.at("ok"), false);
  EXPECT_TRUE(doc.at("error").is_string());
  EXPECT_TRUE(doc.at("floor_bytes").is_number_unsigned());
  EXPECT_TRUE(doc.at("ctx").is_number_integer());
  EXPECT_FALSE(doc.contains("pinned_bytes"));
  EXPECT_EQ(RunPlan({Stories(), "--ram-budget", "lots"}), 2);
  EXPECT_EQ(RunPlan({}), 2);
}

// Where weights stream, each step reads them: the plan gives prompts
// larger steps than the resident 64 tokens (as large as a sixteenth of the
// budget holds the activations of).
TEST(PlanCommandTest, StreamingPlansGivePromptsLargerSteps) {
  for (auto [budget, streams] : {std::pair{"65MiB", true}, std::pair{"512MiB", false}}) {
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(RunPlan({Stories(), "--ram-budget", budget, "--ctx", "64", "--json"}), 0);
    const std::string out = ::testing::internal::GetCapturedStdout();
    const Json doc = Json::parse(out, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(doc.is_discarded()) << out;
    EXPECT_EQ(doc.at("all_resident"), !streams) << out;
    EXPECT_EQ(doc.at("step_tokens") > 64, streams) << out;
    EXPECT_EQ(doc.at("step_scratch_bytes") > doc.at("scratch_bytes"), streams) << out;
  }
}

TEST(BenchCommandTest, StreamsStories260KAndReports) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunBench({Stories(), "--ram-budget", "64.9MiB", "--prompt-tokens", "8", "--gen-tokens",
                      "8", "--mem-bench-bytes", "64MiB", "--json"}),
            0);
  std::string out = ::testing::internal::GetCapturedStdout();
  for (const char* part : {"\"mode\": \"streaming\"", "decode_tokens_per_second",
                           "read_bytes_per_token", "memory_read_gbps", "io_wait_share"}) {
    EXPECT_NE(out.find(part), std::string::npos) << part << " not in:\n" << out;
  }
  const Json doc = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << out;
  EXPECT_EQ(doc.at("gen_tokens"), 8);
  EXPECT_GT(doc.at("step_tokens"), 64);  // Streaming: prompts in larger steps.
  EXPECT_TRUE(doc.at("decode_tokens_per_second").is_number_float());
  EXPECT_TRUE(doc.at("huge_pages").is_boolean());
  // Figures name the machine and the kernels they came from.
  EXPECT_FALSE(doc.at("cpu").get<std::string>().empty());
  EXPECT_EQ(doc.at("kernels"), std::string(kernels::IsaName(kernels::DetectIsa())));
  EXPECT_EQ(doc.at("threads"), 2);
  // Decode is held to the faster of the memory probes before and after it
  // (the second only where RAM has room for it beside the budget).
  const double before = doc.at("memory_read_gbps_before").get<double>();
  const double after = doc.at("memory_read_gbps_after").get<double>();
  EXPECT_GT(before, 0);
  EXPECT_DOUBLE_EQ(doc.at("memory_read_gbps").get<double>(), std::max(before, after));
  // Streaming at the floor: the run is held to the slower of memory and
  // disk, and says how close it came.
  EXPECT_TRUE(doc.at("bound") == "disk read" || doc.at("bound") == "memory" ||
              doc.at("bound") == "compute")
      << doc.at("bound");
  EXPECT_GT(doc.at("bound_tokens_per_second").get<double>(), 0);
  EXPECT_GT(doc.at("bound_achieved_share").get<double>(), 0);
  // The bound is the slowest of the three: memory (touched bytes at the
  // probe's rate), the kernels' in-cache rates, and the disk (the bytes a
  // token needed at the rate reads ran at).
  const double memory_tps = doc.at("memory_read_gbps").get<double>() * 1e9 /
                            doc.at("weight_bytes_touched_per_token").get<double>();
  const double compute_tps = doc.at("compute_bound_tokens_per_second").get<double>();
  EXPECT_GT(compute_tps, 0);
  EXPECT_FALSE(doc.at("kernel_gbps_in_cache").empty());
  double disk_tps = 1e30;
  if (doc.at("needed_read_bytes_per_token").get<double>() > 0) {
    disk_tps = doc.at("read_busy_gbps").get<double>() * 1e9 /
               doc.at("needed_read_bytes_per_token").get<double>();
  }
  const double slowest = std::min({memory_tps, compute_tps, disk_tps});
  EXPECT_NEAR(doc.at("bound_tokens_per_second").get<double>(), slowest, 1e-6 * slowest);
  const char* name = slowest == memory_tps    ? "memory"
                     : slowest == compute_tps ? "compute"
                                              : "disk read";
  EXPECT_EQ(doc.at("bound"), name);
  // The host's steal beside the figures: a share where /proc/stat counts it.
  for (const char* key : {"steal_share_prefill", "steal_share_decode"}) {
    ASSERT_TRUE(doc.contains(key)) << key;
    if (!doc.at(key).is_null()) {
      EXPECT_GE(doc.at(key).get<double>(), 0) << key;
      EXPECT_LE(doc.at(key).get<double>(), 1) << key;
    }
  }
}

TEST(BenchCommandTest, ResidentWhenEverythingFits) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunBench({Stories(), "--ram-budget", "512MiB", "--gen-tokens", "4", "--mem-bench-bytes",
                      "64MiB"}),
            0);
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("mode:           resident"), std::string::npos) << out;
  EXPECT_NE(out.find(std::string(kernels::IsaName(kernels::DetectIsa())) + " kernels, 2 threads"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("machine reads "), std::string::npos) << out;
  EXPECT_NE(out.find("(same threads"), std::string::npos) << out;
  // Nothing read from disk: memory or the kernels are the bound.
  EXPECT_TRUE(out.find("bound:          memory, ") != std::string::npos ||
              out.find("bound:          compute, ") != std::string::npos)
      << out;
  EXPECT_NE(out.find("compute:        kernels in cache (faster of probes before and after) F32 "),
            std::string::npos)
      << out;
  // The host's steal, or why it was not counted (4 tokens of this model can
  // end within one clock tick).
  if (ReadHostCpuTimes()) {
    EXPECT_TRUE(out.find("host:           hypervisor steal ") != std::string::npos ||
                out.find("host:           decode ended within one clock tick") != std::string::npos)
        << out;
  } else {
    EXPECT_NE(out.find("host:           steal not known"), std::string::npos) << out;
  }
}

TEST(BenchCommandTest, RefusesBadFlagsBeforeLoading) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{Stories(), "--lookahead-guesses", "-1"},
        std::vector<std::string>{Stories(), "--gen-tokens", "0"},
        std::vector<std::string>{Stories(), "--sessions", "0"}}) {
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(RunBench(args), 2) << args[1];
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(args[1]), std::string::npos) << err;
  }
}

TEST(BenchCommandTest, SessionRoundsSayTheHostsSteal) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunBench({Stories(), "--ram-budget", "128MiB", "--sessions", "1,2", "--prompt-tokens",
                      "4", "--gen-tokens", "8", "--mem-bench-bytes", "64MiB"}),
            0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("read/token  steal"), std::string::npos) << out;
  // Each round's row ends in its steal share (or n/a within a clock tick).
  for (const char* row : {"\n       1 ", "\n       2 "}) {
    const size_t at = out.find(row);
    ASSERT_NE(at, std::string::npos) << row << " not in:\n" << out;
    const std::string line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
    EXPECT_TRUE(line.back() == '%' || line.ends_with("n/a")) << line;
  }
  // The late-arrival request's other asks for more tokens than this context
  // holds, so it may end before the poll sees it decode: the run then says
  // so and ends (it once waited forever).
  EXPECT_TRUE(out.find("late arrival: time to first token") != std::string::npos ||
              out.find("late arrival: not measured: a request ended before the 1 others") !=
                  std::string::npos)
      << out;
}

TEST(PlanCommandTest, VramBudgetShowsThreeTiers) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunPlan({Stories(), "--ram-budget", "65MiB", "--vram-budget", "1MiB", "--ctx", "256"}),
            0);
  std::string out = ::testing::internal::GetCapturedStdout();
  for (const char* part : {"VRAM budget:  1.00 MiB", "RAM tier:", "tiers:", "per token:"}) {
    EXPECT_NE(out.find(part), std::string::npos) << part << " not in:\n" << out;
  }
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunPlan({Stories(), "--ram-budget", "65MiB", "--vram-budget", "1MiB", "--ctx", "256",
                     "--json"}),
            0);
  out = ::testing::internal::GetCapturedStdout();
  const Json doc = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << out;
  EXPECT_EQ(doc.at("vram_budget_bytes"), 1 << 20);
  EXPECT_GT(doc.at("vram_chunks").get<int64_t>(), 0);
  EXPECT_GT(doc.at("bytes_per_token").at("vram").get<int64_t>(), 0);
}

TEST(BenchCommandTest, VramTierOnTheFakeDeviceAndNoCudaSaysSo) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunBench({Stories(), "--ram-budget", "64.9MiB", "--vram-budget", "1MiB", "--device",
                      "fake", "--prompt-tokens", "8", "--gen-tokens", "8", "--mem-bench-bytes",
                      "64MiB", "--json"}),
            0);
  std::string out = ::testing::internal::GetCapturedStdout();
  const Json doc = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << out;
  EXPECT_EQ(doc.at("device"), "fake");
  EXPECT_NE(doc.at("mode").get<std::string>().find("VRAM"), std::string::npos) << out;
  EXPECT_GT(doc.at("vram_bytes_per_token").get<double>(), 0);
  EXPECT_GT(doc.at("device_products_per_token").get<double>(), 0);
  EXPECT_TRUE(doc.at("bound_seconds_per_token").contains("hbm"));
  // The device runs part of the products: the tiers' bounds stand, the CPU
  // kernels' probe does not.
  EXPECT_TRUE(doc.at("compute_bound_tokens_per_second").is_null());

  // Without a GPU (or a CUDA build) the default device is refused clearly.
  ::testing::internal::CaptureStderr();
  const int code = RunBench({Stories(), "--ram-budget", "64.9MiB", "--vram-budget", "1MiB",
                             "--gen-tokens", "2", "--mem-bench-bytes", "64MiB"});
  const std::string err = ::testing::internal::GetCapturedStderr();
  if (code != 0) {
    EXPECT_NE(err.find("no CUDA device"), std::string::npos) << err;
    EXPECT_NE(err.find("--device fake"), std::string::npos) << err;
  }
}

TEST(HostCpuTimesTest, ParsesTheCpuLineAndItsSteal) {
  // A 5.x kernel's first lines: user nice system idle iowait irq softirq
  // steal guest guest_nice.
  const std::optional<HostCpuTimes> t = ParseHostCpuTimes(
      "cpu  6729898 71 357363 6254291 182489 0 19277 358266 0 0\n"
      "cpu0 3364949 35 178681 3127145 91244 0 9638 179133 0 0\n");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->steal, 358266u);
  EXPECT_EQ(t->total, 6729898u + 71 + 357363 + 6254291 + 182489 + 0 + 19277 + 358266);
  // Not the machine's line, or too old a kernel to count steal.
  EXPECT_FALSE(ParseHostCpuTimes("cpu0 1 2 3 4 5 6 7 8\n").has_value());
  EXPECT_FALSE(ParseHostCpuTimes("cpu  1 2 3 4 5 6 7\n").has_value());
  EXPECT_FALSE(ParseHostCpuTimes("cpu  1 2 3 x 5 6 7 8\n").has_value());
  EXPECT_FALSE(ParseHostCpuTimes("").has_value());
}

TEST(HostCpuTimesTest, StealShareOfTheTicksBetweenReadings) {
  const HostCpuTimes a{.total = 1000, .steal = 100}, b{.total = 1400, .steal = 200};
  EXPECT_DOUBLE_EQ(StealShare(a, b).value(), 0.25);
  EXPECT_FALSE(StealShare(a, a).has_value());  // No tick passed.
  EXPECT_FALSE(StealShare(std::nullopt, b).has_value());
  EXPECT_FALSE(StealShare(b, a).has_value());
  // This machine's /proc/stat (Linux since 2.6.11 counts steal) reads, and
  // its counters only grow.
  const std::optional<HostCpuTimes> first = ReadHostCpuTimes();
  ASSERT_TRUE(first.has_value());
  EXPECT_GT(first->total, 0u);
  const std::optional<HostCpuTimes> second = ReadHostCpuTimes();
  ASSERT_TRUE(second.has_value());
  EXPECT_GE(second->total, first->total);
  EXPECT_GE(second->steal, first->steal);
}

TEST(MemoryBandwidthTest, MeasuresSomething) {
  auto gbps = MeasureMemoryReadGbps(64 << 20, 2, 1);
  ASSERT_TRUE(gbps.ok()) << gbps.status();
  EXPECT_GT(*gbps, 0.1);
}

}  // namespace
}  // namespace waste::bench
