// The soak driver by hand, e.g. the long form:
//   bazel run --config=opt //tests/soak:soak -- --duration 1h --report /tmp/soak.json
// Flags: --duration D (after the warm-up; "90s", "20m", "1h"), --warmup D,
// --clients N, --requests N (stop after N), --threads N, --read-faults RATE
// (the fault storm), --seed N, --models DIR (default: stories260K from
// $WASTE_TEST_MODELS), --report FILE (JSON), --rss-log FILE (every sample),
// --ops a,b,... (only those operations, by the report's names). Exits 1 when a request failed
// unexpectedly, a golden check failed, the daemon did not exit cleanly, or
// its memory was not stable (SoakReport::MemoryStable: RSS drifted by 2% or
// more between the first and last tenth, or peaked over the budget plus the
// runtime reserve).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "tests/soak/soak.h"
#include "tests/testdata.h"

int main(int argc, char** argv) {
  waste::soak::SoakOptions options;
  options.progress_every = absl::Seconds(60);
  std::string report_path;
  std::string models;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    bool ok = true;
    if (flag == "--duration") {
      ok = absl::ParseDuration(value, &options.duration);
    } else if (flag == "--warmup") {
      ok = absl::ParseDuration(value, &options.warmup);
    } else if (flag == "--clients") {
      ok = absl::SimpleAtoi(value, &options.clients);
    } else if (flag == "--requests") {
      ok = absl::SimpleAtoi(value, &options.max_requests);
    } else if (flag == "--threads") {
      ok = absl::SimpleAtoi(value, &options.threads);
    } else if (flag == "--read-faults") {
      ok = absl::SimpleAtod(value, &options.read_fault_rate);
    } else if (flag == "--seed") {
      ok = absl::SimpleAtoi(value, &options.seed);
    } else if (flag == "--models") {
      models = value;
    } else if (flag == "--report") {
      report_path = value;
    } else if (flag == "--ops") {
      options.only_ops = absl::StrSplit(value, ',');
    } else if (flag == "--rss-log") {
      options.rss_log = value;
    } else {
      fprintf(stderr, "soak: unknown flag %s (see tests/soak/soak_main.cc)\n", flag.c_str());
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "soak: bad value '%s' for %s\n", value, flag.c_str());
      return 2;
    }
    ++i;
  }
  if (models.empty()) {
    models = waste::testing::TempDir() + "/models";
    std::filesystem::create_directories(models);
    std::filesystem::create_symlink(waste::testing::ModelPath("stories260K/stories260K.gguf"),
                                    models + "/stories260K.gguf");
  }
  options.models_dir = models;
  absl::StatusOr<waste::soak::SoakReport> report = waste::soak::RunSoak(options);
  if (!report.ok()) {
    fprintf(stderr, "soak: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  printf("%s", report->ToText().c_str());
  if (!report_path.empty()) std::ofstream(report_path) << report->ToJson() << "\n";
  const bool passed = report->unexpected_errors == 0 && report->golden_mismatches == 0 &&
                      report->daemon_exit_code == 0 && report->MemoryStable();
  printf("%s\n", passed ? "PASS" : "FAIL");
  return passed ? 0 : 1;
}
