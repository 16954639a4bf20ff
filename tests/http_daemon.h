// A real wasted daemon with its HTTP face on a free loopback port
// (--http-listen 127.0.0.1:0), for the HTTP end-to-end tests: the ports it
// bound are read from its log.
#ifndef WASTE_TESTS_HTTP_DAEMON_H_
#define WASTE_TESTS_HTTP_DAEMON_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/waste_client.h"
#include "tests/daemon_harness.h"

namespace waste::testing {

class HttpDaemon {
 public:
  // `wasted serve --socket S --models-dir DIR --http-listen 127.0.0.1:0`
  // plus `extra_args`.
  HttpDaemon(const std::string& models_dir, const std::vector<std::string>& extra_args = {});

  // Waits until the daemon serves gRPC and has logged its HTTP port (and
  // its gRPC TCP port, when --listen was given).
  absl::Status Start();

  int http_port() const { return http_port_; }
  int grpc_tcp_port() const { return grpc_tcp_port_; }
  WasteClient& client() { return harness_.client(); }
  Process& process() { return harness_.process(); }

 private:
  DaemonHarness harness_;
  bool wants_tcp_;
  int http_port_ = 0;
  int grpc_tcp_port_ = 0;
};

}  // namespace waste::testing

#endif  // WASTE_TESTS_HTTP_DAEMON_H_
