// The HTTP face's endpoints:
//
//   POST /v1/chat/completions   chat messages through the model's template
//   POST /v1/completions        a raw prompt
//   GET  /v1/models             every model the daemon can serve
//   GET  /v1/models/{id}        one of them
//   GET  /metrics               Prometheus text format
//   GET  /health                200 {"status":"ok"} while serving (no key)
//
// With an API key configured every endpoint but /health wants
// `Authorization: Bearer KEY` (401 otherwise). Handlers never block the I/O
// thread: directory scans, model loads and /metrics run on the blocking
// pool and post their answer back.
#ifndef WASTE_DAEMON_HTTP_ROUTER_H_
#define WASTE_DAEMON_HTTP_ROUTER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/engine/engine.h"
#include "daemon/http/api_error.h"
#include "daemon/http/completion_stream.h"
#include "daemon/http/exchange.h"
#include "daemon/metrics/request_metrics.h"

namespace waste::http {

// What the endpoints need of the daemon; borrowed, outlives the router.
struct RouterContext {
  engine::Engine* engine = nullptr;
  metrics::RequestMetrics* metrics = nullptr;  // May be null.
  PendingSinks* pending = nullptr;
  std::string api_key;  // "" -> no authentication.
  // Runs slow work off the I/O threads.
  std::function<void(std::function<void()>)> run_blocking;
  absl::Time started = absl::Now();
};

// A request refused before its body is read.
struct Refusal {
  ApiError error;
  HttpHeaders headers;  // Allow (405), WWW-Authenticate (401).
};

class Router {
 public:
  explicit Router(RouterContext context);

  // The metrics label of a path: the endpoint, or "other".
  static std::string EndpointLabel(absl::string_view path);

  // Checks path, method and key from the request's headers, before its
  // body is read: 404 unknown path, 405 wrong method, 401 missing or wrong
  // key. nullopt: go on.
  std::optional<Refusal> Precheck(absl::string_view method, absl::string_view path,
                                  absl::string_view authorization) const;

  // Answers a request that passed Precheck. On the connection's strand.
  void Handle(const HttpRequest& request, std::shared_ptr<Exchange> exchange);

  // Shutting down: /health says 503 so load balancers look elsewhere.
  void set_draining() { draining_.store(true); }

 private:
  void ListModels(std::shared_ptr<Exchange> exchange);
  void GetModel(std::string id, std::shared_ptr<Exchange> exchange);
  void Metrics(std::shared_ptr<Exchange> exchange);

  RouterContext context_;
  std::atomic<bool> draining_{false};
};

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_ROUTER_H_
