// One OpenAI completion request on its way through the engine: the HTTP
// face's counterpart of service/generate_reactor. It submits the request to
// the model's scheduler (after a model load on a blocking thread, if the
// model is not loaded yet) and is the request's GenerationSink: the
// scheduler's thread queues events here, and the connection's strand turns
// them into server-sent events or one JSON body. A client that goes away
// cancels the generation at the next step; a client that stops reading
// makes the scheduler pause the request (Backlog counts the events not yet
// with the kernel).
#ifndef WASTE_DAEMON_HTTP_COMPLETION_STREAM_H_
#define WASTE_DAEMON_HTTP_COMPLETION_STREAM_H_

#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "daemon/engine/engine.h"
#include "daemon/http/exchange.h"
#include "daemon/http/openai_request.h"
#include "daemon/metrics/request_metrics.h"

namespace waste::http {

// Counts the requests whose sink the engine holds (submitted, Finish not
// yet called). The HTTP server waits for none before it stops the threads
// their events are posted to.
class PendingSinks {
 public:
  void Add();
  void Done();
  // Blocks until the count is zero.
  void WaitForNone();

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

// What a completion needs of the daemon; borrowed, outlives the requests.
struct CompletionContext {
  engine::Engine* engine = nullptr;
  metrics::RequestMetrics* metrics = nullptr;  // May be null.
  PendingSinks* pending = nullptr;
  // Runs slow work (a model load) off the I/O threads.
  std::function<void(std::function<void()>)> run_blocking;
};

// Starts answering `request` on `exchange` (call it on the strand). The
// request keeps itself alive until the engine and the connection are done
// with it.
void StartCompletion(const CompletionContext& context, CompletionRequest request,
                     std::shared_ptr<Exchange> exchange);

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_COMPLETION_STREAM_H_
