#include "tests/http_daemon.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace waste::testing {
namespace {

std::vector<std::string> WithHttp(const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {"--http-listen", "127.0.0.1:0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return args;
}

// The number that follows `marker` in `log`, or 0.
int NumberAfter(const std::string& log, const std::string& marker) {
  const size_t at = log.find(marker);
  if (at == std::string::npos) return 0;
  size_t end = at + marker.size();
  while (end < log.size() && isdigit(static_cast<unsigned char>(log[end]))) ++end;
  int port = 0;
  if (!absl::SimpleAtoi(log.substr(at + marker.size(), end - at - marker.size()), &port)) return 0;
  return port;
}

}  // namespace

HttpDaemon::HttpDaemon(const std::string& models_dir, const std::vector<std::string>& extra_args)
    : harness_(models_dir, WithHttp(extra_args)),
      wants_tcp_(std::find(extra_args.begin(), extra_args.end(), "--listen") != extra_args.end()) {}

absl::Status HttpDaemon::Start() {
  if (absl::Status serving = harness_.WaitUntilServing(); !serving.ok()) return serving;
  // The HTTP face starts after gRPC's: its line comes a moment later.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    const std::string log = harness_.process().Stderr();
    http_port_ = NumberAfter(log, "serving HTTP on http://127.0.0.1:");
    grpc_tcp_port_ = NumberAfter(log, "(tcp port ");
    if (http_port_ > 0 && (!wants_tcp_ || grpc_tcp_port_ > 0)) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "wasted never logged its HTTP port; its stderr:\n", harness_.process().Stderr()));
}

}  // namespace waste::testing
