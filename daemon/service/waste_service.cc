#include "daemon/service/waste_service.h"

#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "daemon/service/call_auth.h"
#include "daemon/service/generate_reactor.h"
#include "daemon/service/version.h"

namespace waste {
namespace {

// Runs `work` on its own thread and finishes the call with its status.
grpc::ServerUnaryReactor* RunOffThread(grpc::CallbackServerContext* context,
                                       std::function<absl::Status()> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::thread([reactor, work = std::move(work)] {
    reactor->Finish(ToGrpcStatus(work()));
  }).detach();
  return reactor;
}

}  // namespace

WasteService::WasteService(engine::Engine* engine, WasteServiceOptions options)
    : engine_(engine), options_(std::move(options)), started_(absl::Now()) {}

grpc::ServerUnaryReactor* WasteService::Unauthenticated(
    grpc::CallbackServerContext* context) const {
  grpc::Status status = CheckCallKey(*context, options_.api_key);
  if (status.ok()) return nullptr;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerWriteReactor<v1::GenerateEvent>* WasteService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  if (grpc::Status status = CheckCallKey(*context, options_.api_key); !status.ok()) {
    return RefuseGenerate(status);
  }
  // A call without a deadline has one far in the future.
  const auto deadline = context->deadline();
  const bool none = deadline > std::chrono::system_clock::now() + std::chrono::hours(24 * 365);
  return StartGenerate(engine_, request, none ? absl::InfiniteFuture() : absl::FromChrono(deadline),
                       options_.metrics);
}

grpc::ServerUnaryReactor* WasteService::Tokenize(grpc::CallbackServerContext* context,
                                                 const v1::TokenizeRequest* request,
                                                 v1::TokenizeResponse* response) {
  if (grpc::ServerUnaryReactor* denied = Unauthenticated(context)) return denied;
  return RunOffThread(context, [this, request, response]() -> absl::Status {
    auto model = engine_->Get(request->model());
    if (!model.ok()) return model.status();
    auto result = (*model)->Tokenize(*request);
    if (!result.ok()) return result.status();
    *response = *std::move(result);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* WasteService::Detokenize(grpc::CallbackServerContext* context,
                                                   const v1::DetokenizeRequest* request,
                                                   v1::DetokenizeResponse* response) {
  if (grpc::ServerUnaryReactor* denied = Unauthenticated(context)) return denied;
  return RunOffThread(context, [this, request, response]() -> absl::Status {
    auto model = engine_->Get(request->model());
    if (!model.ok()) return model.status();
    auto result = (*model)->Detokenize(*request);
    if (!result.ok()) return result.status();
    *response = *std::move(result);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* WasteService::ListModels(grpc::CallbackServerContext* context,
                                                   const v1::ListModelsRequest* /*request*/,
                                                   v1::ListModelsResponse* response) {
  if (grpc::ServerUnaryReactor* denied = Unauthenticated(context)) return denied;
  // Reading GGUF headers is file I/O: off the gRPC threads.
  return RunOffThread(context, [this, response]() -> absl::Status {
    absl::flat_hash_map<std::string, std::shared_ptr<engine::LoadedModel>> loaded;
    for (auto& model : engine_->Loaded()) loaded[model->name()] = model;
    for (const ModelFile& file : engine_->catalog().Scan()) {
      v1::ModelInfo* info = response->add_models();
      auto it = loaded.find(file.name);
      if (it != loaded.end()) {
        it->second->FillInfo(info);
      } else {
        engine_->Describe(file, info);
      }
      info->set_name(file.name);
      info->set_path(file.path);
      info->set_size_bytes(file.size_bytes);
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* WasteService::LoadModel(grpc::CallbackServerContext* context,
                                                  const v1::LoadModelRequest* request,
                                                  v1::LoadModelResponse* response) {
  if (grpc::ServerUnaryReactor* denied = Unauthenticated(context)) return denied;
  return RunOffThread(context, [this, request, response]() -> absl::Status {
    absl::Time start = absl::Now();
    auto model = engine_->Load(request->model(), request->config());
    if (!model.ok()) return model.status();
    (*model)->FillInfo(response->mutable_model());
    *response->mutable_plan() = (*model)->Plan();
    response->set_load_ms(absl::ToDoubleMilliseconds(absl::Now() - start));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* WasteService::UnloadModel(grpc::CallbackServerContext* context,
                                                    const v1::UnloadModelRequest* request,
                                                    v1::UnloadModelResponse* /*response*/) {
  if (grpc::ServerUnaryReactor* denied = Unauthenticated(context)) return denied;
  return RunOffThread(context, [this, request] { return engine_->Unload(request->model(), request->force()); });
}

grpc::ServerUnaryReactor* WasteService::Plan(grpc::CallbackServerContext* context,
                                             const v1::PlanRequest* request,
                                             v1::PlanResponse* response) {
  if (grpc::ServerUnaryReactor* denied = Unauthenticated(context)) return denied;
  return RunOffThread(context, [this, request, response]() -> absl::Status {
    auto plan = engine_->Plan(*request);
    if (!plan.ok()) return plan.status();
    *response->mutable_plan() = *std::move(plan);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* WasteService::GetStats(grpc::CallbackServerContext* context,
                                                 const v1::GetStatsRequest* request,
                                                 v1::GetStatsResponse* response) {
  if (grpc::ServerUnaryReactor* denied = Unauthenticated(context)) return denied;
  int running = 0, waiting = 0;
  for (const auto& model : engine_->Loaded()) {
    v1::ModelStats stats = model->Stats();
    running += stats.running_requests();
    waiting += stats.queued_requests();
    if (!request->model().empty() && request->model() != model->name()) continue;
    *response->add_models() = std::move(stats);
  }
  response->set_active_requests(running);
  response->set_queued_requests(waiting);
  response->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  response->set_version(kWasteVersion);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* WasteService::SaveSession(grpc::CallbackServerContext* context,
                                                    const v1::SaveSessionRequest* request,
                                                    v1::SaveSessionResponse* response) {
  if (grpc::ServerUnaryReactor* denied = Unauthenticated(context)) return denied;
  // Waits for the model's step loop and writes a file: off the gRPC threads.
  return RunOffThread(context, [this, request, response]() -> absl::Status {
    std::shared_ptr<engine::LoadedModel> model = engine_->TryGetLoaded(request->model());
    if (model == nullptr) {
      return absl::NotFoundError(absl::StrCat("model '", request->model(),
                                              "' is not loaded, so it has no open sessions"));
    }
    absl::StatusOr<engine::SavedSessionInfo> saved = model->SaveSession(request->session_id());
    if (!saved.ok()) return saved.status();
    response->set_path(saved->path);
    response->set_bytes(static_cast<int64_t>(saved->bytes));
    response->set_tokens(saved->tokens);
    return absl::OkStatus();
  });
}

}  // namespace waste
