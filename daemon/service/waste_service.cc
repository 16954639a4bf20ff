#include "daemon/service/waste_service.h"

#include "daemon/service/version.h"

namespace waste {

WasteService::WasteService(const ModelCatalog* catalog)
    : catalog_(catalog), started_(absl::Now()) {}

grpc::ServerUnaryReactor* WasteService::ListModels(grpc::CallbackServerContext* context,
                                                   const v1::ListModelsRequest* /*request*/,
                                                   v1::ListModelsResponse* response) {
  for (const ModelFile& file : catalog_->Scan()) {
    v1::ModelInfo* info = response->add_models();
    info->set_name(file.name);
    info->set_path(file.path);
    info->set_size_bytes(file.size_bytes);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* WasteService::GetStats(grpc::CallbackServerContext* context,
                                                 const v1::GetStatsRequest* /*request*/,
                                                 v1::GetStatsResponse* response) {
  response->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  response->set_version(kWasteVersion);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace waste
