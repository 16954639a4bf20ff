// The API key for gRPC calls over TCP: `authorization: Bearer KEY` call
// metadata, checked by every WasteService method before it does anything.
// Calls on the Unix socket are exempt (its file mode is the access
// control). The check lives in the service because gRPC 1.51 offers no
// other place that can refuse a call on an insecure port: an
// AuthMetadataProcessor needs TLS credentials (the insecure ones abort when
// given one) and server interceptors cannot fail a call.
#ifndef WASTE_DAEMON_SERVICE_CALL_AUTH_H_
#define WASTE_DAEMON_SERVICE_CALL_AUTH_H_

#include <string>

#include "grpcpp/server_context.h"

namespace waste {

// OK when no key is set, the call came over the Unix socket, or it carries
// the key; else UNAUTHENTICATED.
grpc::Status CheckCallKey(const grpc::CallbackServerContext& context, const std::string& api_key);

}  // namespace waste

#endif  // WASTE_DAEMON_SERVICE_CALL_AUTH_H_
