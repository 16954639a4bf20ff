// The daemon's gRPC server: the Waste service, the standard health service
// and server reflection, on a Unix socket (mode 0660) and optionally TCP.
#ifndef WASTE_DAEMON_SERVICE_SERVER_H_
#define WASTE_DAEMON_SERVICE_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"

namespace waste {

struct ServerOptions {
  std::string socket_path;  // Required.
  std::string listen;       // HOST:PORT, or empty for no TCP listener.
  // Set when TCP calls need an API key (the service checks it, see
  // call_auth.h). Server reflection, which answers without one, is then
  // left off; the health service stays open, like HTTP /health.
  bool tcp_requires_key = false;
};

class Server {
 public:
  // Prepares the socket (creates its directory, refuses a socket another
  // live daemon answers on, removes a stale one) and starts serving
  // `services`, which must outlive the server. Errors say what failed and
  // where: "socket /x/w.sock is in use by another process", "cannot create
  // socket directory /run/waste: Permission denied", ...
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                       const std::vector<grpc::Service*>& services);

  ~Server();

  // Marks the health service NOT_SERVING, finishes calls in flight (cancels
  // those still running after `grace`) and removes the socket file.
  void Shutdown(absl::Duration grace);

  // Blocks until Shutdown has completed.
  void Wait();

  const std::string& socket_path() const { return options_.socket_path; }
  // The TCP port actually bound (useful with port 0), or 0.
  int tcp_port() const { return tcp_port_; }

 private:
  Server(ServerOptions options, std::unique_ptr<grpc::Server> server, int tcp_port);

  ServerOptions options_;
  std::unique_ptr<grpc::Server> server_;
  int tcp_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace waste

#endif  // WASTE_DAEMON_SERVICE_SERVER_H_
