#include "tests/daemon_harness.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/testdata.h"

namespace waste::testing {

DaemonHarness::DaemonHarness(const std::string& models_dir,
                             const std::vector<std::string>& extra_args)
    : socket_(SocketDir() + "/w.sock") {
  std::vector<std::string> argv = {
      RunfilePath("daemon/wasted"), "serve", "--socket", socket_, "--models-dir", models_dir};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  daemon_ = std::make_unique<Process>(argv);
  client_ = WasteClient::Connect("unix:" + socket_);
}

absl::Status DaemonHarness::WaitUntilServing() {
  // The socket file appears at bind(), a moment before the server listens,
  // and a machine busy with other builds can take seconds to start it: poll
  // (the client's reconnect backoff is short) for up to a minute.
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::Status last = absl::DeadlineExceededError("the socket never appeared");
  // A channel whose first connect failed with ENOENT takes seconds to
  // recover here (its reconnects keep failing the handshake), so the first
  // call waits for the socket file.
  if (!WaitForFile(socket_, 60000)) {
    return absl::UnavailableError(
        absl::StrCat("daemon did not create ", socket_, "; its stderr:\n", daemon_->Stderr()));
  }
  while (absl::Now() < deadline) {
    auto health = client_->Health(absl::Seconds(2));
    if (health.ok()) return absl::OkStatus();
    last = health.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::UnavailableError(absl::StrCat("daemon did not start (", last.message(),
                                             "); its stderr:\n", daemon_->Stderr()));
}

}  // namespace waste::testing
