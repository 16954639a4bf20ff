// The daemon's API key and the rules around it, shared by the HTTP face and
// the gRPC service: where the key comes from (api_key or api_key_file), how
// a request's bearer token is checked (in constant time), and which listen
// addresses need one (any that is not loopback, unless
// allow_unauthenticated_remote says otherwise). No transport code here.
#ifndef WASTE_DAEMON_HTTP_AUTH_H_
#define WASTE_DAEMON_HTTP_AUTH_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "waste/v1/config.pb.h"

namespace waste::http {

// Whether `a` equals `b`, in a time that depends on their lengths only, so
// a client cannot learn the key a byte at a time from response times.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// The token of an `Authorization: Bearer TOKEN` header value (the scheme
// is case-insensitive), or nullopt.
std::optional<absl::string_view> BearerToken(absl::string_view authorization);

// Whether a request with this Authorization header value may pass. With no
// key configured everything passes.
bool Authorized(absl::string_view api_key, absl::string_view authorization);

// HOST:PORT split; HOST may be [IPv6]. Errors name the address.
struct HostPort {
  std::string host;  // Without brackets; empty for ":PORT".
  int port = 0;
};
absl::StatusOr<HostPort> SplitHostPort(absl::string_view address);

// Whether a listen address only accepts connections from this machine:
// 127.0.0.0/8, ::1, ::ffff:127.x.y.z or "localhost". Every other host name,
// an empty host and 0.0.0.0 / :: are remote.
bool IsLoopbackListen(absl::string_view address);

// The key the daemon requires: `api_key`, else the first line of
// `api_key_file` (surrounding whitespace removed), else "" (none). Both
// set, an unreadable or empty file are errors that name the key.
absl::StatusOr<std::string> LoadApiKey(const v1::DaemonConfig& config);

// Refuses a configuration that would serve a non-loopback address (the
// gRPC `listen` or `http_listen`) without a key, unless
// allow_unauthenticated_remote is set. The error says what to do.
absl::Status CheckRemoteListenersHaveKey(const v1::DaemonConfig& config, absl::string_view api_key);

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_AUTH_H_
