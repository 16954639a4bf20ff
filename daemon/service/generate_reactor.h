// The server side of one Generate call: the reactor submits the request to
// the model's scheduler and is itself the request's event sink. The
// scheduler's loop pushes events into the reactor's queue; the reactor
// writes them one at a time as gRPC completes each write, so no reaction
// ever blocks and no thread is started per request (only a request for a
// model that still has to be loaded waits for the load on a thread of its
// own). OnCancel (client gone or deadline) ends the request at the next
// step; a client that stops reading pauses its session (see
// engine/scheduler.h).
#ifndef WASTE_DAEMON_SERVICE_GENERATE_REACTOR_H_
#define WASTE_DAEMON_SERVICE_GENERATE_REACTOR_H_

#include "absl/time/time.h"
#include "daemon/engine/engine.h"
#include "daemon/metrics/request_metrics.h"
#include "grpcpp/support/server_callback.h"
#include "waste/v1/generate.pb.h"

namespace waste {

// Starts the call; the reactor deletes itself when gRPC and the engine are
// both done with it. `deadline` is the call's (InfiniteFuture: none). The
// request's outcome, tokens and latencies go to `metrics` (may be null).
grpc::ServerWriteReactor<v1::GenerateEvent>* StartGenerate(engine::Engine* engine,
                                                           const v1::GenerateRequest* request,
                                                           absl::Time deadline,
                                                           metrics::RequestMetrics* metrics);

// A Generate call ended at once with `status` (e.g. UNAUTHENTICATED).
grpc::ServerWriteReactor<v1::GenerateEvent>* RefuseGenerate(const grpc::Status& status);

// absl::Status -> grpc::Status (the codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace waste

#endif  // WASTE_DAEMON_SERVICE_GENERATE_REACTOR_H_
