// The waste.v1.Waste gRPC service: translates RPCs into engine calls and
// back. Holds no scheduling logic. RPCs whose engine parts have not landed
// answer UNIMPLEMENTED (the generated base class's default).
#ifndef WASTE_DAEMON_SERVICE_WASTE_SERVICE_H_
#define WASTE_DAEMON_SERVICE_WASTE_SERVICE_H_

#include "absl/time/time.h"
#include "daemon/service/model_catalog.h"
#include "waste/v1/waste.grpc.pb.h"

namespace waste {

class WasteService final : public v1::Waste::CallbackService {
 public:
  // `catalog` must outlive the service.
  explicit WasteService(const ModelCatalog* catalog);

  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;

  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::GetStatsResponse* response) override;

 private:
  const ModelCatalog* catalog_;
  absl::Time started_;
};

}  // namespace waste

#endif  // WASTE_DAEMON_SERVICE_WASTE_SERVICE_H_
