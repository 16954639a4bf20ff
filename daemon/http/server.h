// The daemon's HTTP/1.1 face (Boost.Beast over Asio): OpenAI-compatible
// completions, the model list, /metrics and /health (router.h), served
// from a small io_context on `io_threads` threads. Each connection lives
// on its own strand; the engine's events reach it by posting there, and
// slow work runs on a separate blocking pool, so an I/O thread never waits.
//
// Limits, so that slow or malformed clients cannot hold the daemon: header
// bytes (431), body bytes (413, checked from Content-Length before the body
// is read), a deadline for the headers and one for the body of a request,
// an idle keep-alive timeout, a write timeout for clients that stop
// reading, and a connection cap (more connections get a 503 and are
// closed). Refused requests close their connection when their body was not
// read, after a short lingering drain so the client sees the answer.
//
// Thread-safety: Start, Shutdown and the destructor from one thread.
#ifndef WASTE_DAEMON_HTTP_SERVER_H_
#define WASTE_DAEMON_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/engine/engine.h"
#include "daemon/metrics/request_metrics.h"

namespace waste::http {

struct HttpServerOptions {
  std::string listen;   // HOST:PORT; port 0 picks a free one (see port()).
  std::string api_key;  // "" -> no authentication.
  int64_t max_body_bytes = 1 << 20;
  int64_t max_header_bytes = 16 << 10;
  int max_connections = 256;
  absl::Duration header_timeout = absl::Seconds(10);  // All of a request's headers.
  absl::Duration body_timeout = absl::Seconds(30);    // All of its body.
  absl::Duration idle_timeout = absl::Seconds(60);    // Keep-alive, between requests.
  absl::Duration write_timeout = absl::Seconds(30);   // One write to a client.
  int io_threads = 2;
  int blocking_threads = 4;  // Model loads, directory scans, /metrics.
};

class HttpServer {
 public:
  // Binds and starts serving. `engine` and `metrics` (may be null) must
  // outlive the server. Errors name the address.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           engine::Engine* engine,
                                                           metrics::RequestMetrics* metrics);

  // Shuts down (with no grace if Shutdown was not called) and waits until
  // no thread, connection or engine request refers to the server.
  ~HttpServer();

  // Stops accepting, answers /health with 503, closes idle connections and,
  // after `grace`, every connection still open (which cancels their
  // generations). Returns at once.
  void Shutdown(absl::Duration grace);

  // The bound port (useful with port 0).
  int port() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_SERVER_H_
