// A real wasted daemon on a private socket for a test, with a client
// connected to it once it serves.
#ifndef WASTE_TESTS_DAEMON_HARNESS_H_
#define WASTE_TESTS_DAEMON_HARNESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/waste_client.h"
#include "tests/subprocess.h"

namespace waste::testing {

class DaemonHarness {
 public:
  // Starts `wasted serve --socket S --models-dir DIR` plus `extra_args`.
  DaemonHarness(const std::string& models_dir, const std::vector<std::string>& extra_args = {});

  // Waits until the daemon answers SERVING; the error carries its stderr.
  absl::Status WaitUntilServing();

  const std::string& socket() const { return socket_; }
  WasteClient& client() { return *client_; }
  Process& process() { return *daemon_; }

 private:
  std::string socket_;
  std::unique_ptr<Process> daemon_;
  std::unique_ptr<WasteClient> client_;
};

}  // namespace waste::testing

#endif  // WASTE_TESTS_DAEMON_HARNESS_H_
