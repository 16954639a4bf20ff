// The waste.v1.Waste gRPC service: translates RPCs into engine calls and
// back. Holds no scheduling logic. Engine work (loading a model, tokenizing,
// generating) runs off the gRPC threads so no reaction blocks.
#ifndef WASTE_DAEMON_SERVICE_WASTE_SERVICE_H_
#define WASTE_DAEMON_SERVICE_WASTE_SERVICE_H_

#include <string>

#include "absl/time/time.h"
#include "daemon/engine/engine.h"
#include "daemon/metrics/request_metrics.h"
#include "waste/v1/waste.grpc.pb.h"

namespace waste {

struct WasteServiceOptions {
  // Fed with every Generate call's outcome, tokens and latencies (the
  // HTTP face feeds the same). May be null.
  metrics::RequestMetrics* metrics = nullptr;
  // Calls over TCP must carry `authorization: Bearer KEY` metadata (see
  // call_auth.h); "" -> no key.
  std::string api_key;
};

class WasteService final : public v1::Waste::CallbackService {
 public:
  // `engine` (and options.metrics) must outlive the service.
  explicit WasteService(engine::Engine* engine, WasteServiceOptions options = {});

  grpc::ServerWriteReactor<v1::GenerateEvent>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* context,
                                      const v1::LoadModelRequest* request,
                                      v1::LoadModelResponse* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* context,
                                        const v1::UnloadModelRequest* request,
                                        v1::UnloadModelResponse* response) override;
  grpc::ServerUnaryReactor* Plan(grpc::CallbackServerContext* context,
                                 const v1::PlanRequest* request,
                                 v1::PlanResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::GetStatsResponse* response) override;
  grpc::ServerUnaryReactor* SaveSession(grpc::CallbackServerContext* context,
                                        const v1::SaveSessionRequest* request,
                                        v1::SaveSessionResponse* response) override;

 private:
  // Null when the call may go on; else a reactor already finished with
  // UNAUTHENTICATED, to return.
  grpc::ServerUnaryReactor* Unauthenticated(grpc::CallbackServerContext* context) const;

  engine::Engine* engine_;
  WasteServiceOptions options_;
  absl::Time started_;
};

}  // namespace waste

#endif  // WASTE_DAEMON_SERVICE_WASTE_SERVICE_H_
