// The server side of one Generate call: the engine runs the generation on a
// thread of its own and pushes events into a queue; the reactor writes them
// one at a time as gRPC completes each write, so no reaction ever blocks.
// OnCancel (client gone or deadline) stops the engine at its next token.
#ifndef WASTE_DAEMON_SERVICE_GENERATE_REACTOR_H_
#define WASTE_DAEMON_SERVICE_GENERATE_REACTOR_H_

#include "daemon/engine/engine.h"
#include "grpcpp/support/server_callback.h"
#include "waste/v1/generate.pb.h"

namespace waste {

// Starts the call; the reactor deletes itself when gRPC is done with it.
grpc::ServerWriteReactor<v1::GenerateEvent>* StartGenerate(engine::Engine* engine,
                                                           const v1::GenerateRequest* request);

// absl::Status -> grpc::Status (the codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace waste

#endif  // WASTE_DAEMON_SERVICE_GENERATE_REACTOR_H_
