#include "client/waste_client.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/default_address.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace waste {

std::string ResolveTarget(const std::string& socket, const std::string& address) {
  if (!socket.empty()) return SocketTarget(socket);
  if (!address.empty()) return address;
  const char* env = getenv("WASTE_ADDRESS");
  if (env != nullptr && env[0] != '\0') return env;
  return SocketTarget(DefaultSocketPath());
}

std::string StartDaemonHint(const std::string& target) {
  if (absl::StartsWith(target, "unix:")) {
    return absl::StrCat("start one with: wasted serve --socket ", target.substr(5),
                        " --models-dir DIR");
  }
  return absl::StrCat("start one with: wasted serve --listen ", target, " --models-dir DIR");
}

void WasteClient::Prepare(grpc::ClientContext* context) const {
  if (!api_key_.empty()) context->AddMetadata("authorization", "Bearer " + api_key_);
}

std::unique_ptr<WasteClient> WasteClient::Connect(const std::string& target,
                                                  const std::string& api_key) {
  grpc::ChannelArguments args;
  // Generation streams can be long; keep idle connections alive.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
  // A local daemon that is just starting answers within milliseconds; do
  // not let gRPC's default reconnect backoff (1 s and growing) make a
  // client that arrived early wait seconds.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  auto client = std::unique_ptr<WasteClient>(new WasteClient(target, std::move(channel)));
  client->api_key_ = api_key;
  return client;
}

WasteClient::WasteClient(std::string target, std::shared_ptr<grpc::Channel> channel)
    : target_(std::move(target)),
      channel_(std::move(channel)),
      stub_(v1::Waste::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

absl::Status WasteClient::ToStatus(const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  auto code = static_cast<absl::StatusCode>(status.error_code());
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::Status(
        code, absl::StrCat("no daemon answering at ", target_, " (", status.error_message(), ")"));
  }
  return absl::Status(code, status.error_message());
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> WasteClient::Health(
    absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context);
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = health_->Check(&context, request, &response);
  if (!status.ok()) return ToStatus(status);
  return response.status();
}

#define WASTE_CLIENT_UNARY(Name)                                                           \
  absl::StatusOr<v1::Name##Response> WasteClient::Name(const v1::Name##Request& request) { \
    grpc::ClientContext context;                                                           \
    Prepare(&context);                                                                     \
    v1::Name##Response response;                                                           \
    grpc::Status status = stub_->Name(&context, request, &response);                       \
    if (!status.ok()) return ToStatus(status);                                             \
    return response;                                                                       \
  }

WASTE_CLIENT_UNARY(GetStats)
WASTE_CLIENT_UNARY(SaveSession)
WASTE_CLIENT_UNARY(LoadModel)
WASTE_CLIENT_UNARY(UnloadModel)
WASTE_CLIENT_UNARY(Plan)
WASTE_CLIENT_UNARY(Tokenize)
WASTE_CLIENT_UNARY(Detokenize)

#undef WASTE_CLIENT_UNARY

absl::StatusOr<v1::ListModelsResponse> WasteClient::ListModels() {
  grpc::ClientContext context;
  Prepare(&context);
  v1::ListModelsResponse response;
  grpc::Status status = stub_->ListModels(&context, v1::ListModelsRequest(), &response);
  if (!status.ok()) return ToStatus(status);
  return response;
}

absl::Status WasteClient::Generate(const v1::GenerateRequest& request,
                                   const std::function<bool(const v1::GenerateEvent&)>& on_event) {
  grpc::ClientContext context;
  Prepare(&context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader =
      stub_->Generate(&context, request);
  v1::GenerateEvent event;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      context.TryCancel();
      break;
    }
  }
  return ToStatus(reader->Finish());
}

}  // namespace waste
