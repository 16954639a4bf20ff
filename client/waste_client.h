// C++ client library for the waste daemon (wasted). Wraps the waste.v1 gRPC
// API and the standard health service with blocking calls that return
// absl::Status values.
//
//   auto client = waste::WasteClient::Connect(waste::ResolveTarget("", ""));
//   absl::StatusOr<v1::ListModelsResponse> models = client->ListModels();
//
// Thread-safe: one client may be used from many threads.
#ifndef WASTE_CLIENT_WASTE_CLIENT_H_
#define WASTE_CLIENT_WASTE_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "waste/v1/waste.grpc.pb.h"

namespace waste {

// The gRPC target to use: `socket` (a Unix socket path) if set, else
// `address` (HOST:PORT or unix:PATH) if set, else $WASTE_ADDRESS, else the
// default socket (see DefaultSocketPath()).
std::string ResolveTarget(const std::string& socket, const std::string& address);

// One line telling a user how to start a daemon that listens on `target`.
std::string StartDaemonHint(const std::string& target);

class WasteClient {
 public:
  // Creates a client for `target`; no connection is made until the first
  // call, so this cannot fail.
  // `api_key`, when not empty, goes with every call as `authorization:
  // Bearer KEY` (what a daemon with an API key wants over TCP).
  static std::unique_ptr<WasteClient> Connect(const std::string& target,
                                              const std::string& api_key = "");

  const std::string& target() const { return target_; }

  // The daemon's health: SERVING or NOT_SERVING. A daemon that cannot be
  // reached is an UNAVAILABLE error whose message says where the client
  // looked.
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health(
      absl::Duration timeout = absl::Seconds(5));

  absl::StatusOr<v1::ListModelsResponse> ListModels();
  absl::StatusOr<v1::GetStatsResponse> GetStats(const v1::GetStatsRequest& request);
  absl::StatusOr<v1::SaveSessionResponse> SaveSession(const v1::SaveSessionRequest& request);
  absl::StatusOr<v1::LoadModelResponse> LoadModel(const v1::LoadModelRequest& request);
  absl::StatusOr<v1::UnloadModelResponse> UnloadModel(const v1::UnloadModelRequest& request);
  absl::StatusOr<v1::PlanResponse> Plan(const v1::PlanRequest& request);
  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request);
  absl::StatusOr<v1::DetokenizeResponse> Detokenize(const v1::DetokenizeRequest& request);

  // Runs a generation, calling `on_event` for every event as it arrives.
  // Returning false from `on_event` cancels the generation. Returns the
  // call's final status (OK after a done event; CANCELLED if cancelled).
  absl::Status Generate(const v1::GenerateRequest& request,
                        const std::function<bool(const v1::GenerateEvent&)>& on_event);

 private:
  WasteClient(std::string target, std::shared_ptr<grpc::Channel> channel);

  // Converts a failed call's status, adding where the client looked when the
  // daemon could not be reached.
  absl::Status ToStatus(const grpc::Status& status) const;

  // A context for one call, carrying the API key when there is one.
  void Prepare(grpc::ClientContext* context) const;

  std::string target_;
  std::string api_key_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Waste::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace waste

#endif  // WASTE_CLIENT_WASTE_CLIENT_H_
