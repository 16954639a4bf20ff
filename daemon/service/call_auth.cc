#include "daemon/service/call_auth.h"

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "daemon/http/auth.h"

namespace waste {

grpc::Status CheckCallKey(const grpc::CallbackServerContext& context, const std::string& api_key) {
  if (api_key.empty()) return grpc::Status::OK;
  // gRPC names Unix socket peers "unix:..." and TCP ones "ipv4:..."/"ipv6:...".
  if (absl::StartsWith(context.peer(), "unix:")) return grpc::Status::OK;
  absl::string_view authorization;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  if (http::Authorized(api_key, authorization)) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      http::BearerToken(authorization).has_value()
                          ? "incorrect API key"
                          : "this daemon wants an API key over TCP: send call metadata "
                            "`authorization: Bearer KEY` (or use the Unix socket)");
}

}  // namespace waste
