#include "daemon/http/router.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/http/auth.h"
#include "daemon/http/metrics_page.h"
#include "daemon/http/openai_request.h"
#include "daemon/metrics/prometheus_text.h"

namespace waste::http {
namespace {

using Json = nlohmann::json;

constexpr char kJson[] = "application/json";
constexpr char kModelsPrefix[] = "/v1/models/";

struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {
    {"/v1/chat/completions", "POST"},
    {"/v1/completions", "POST"},
    {"/v1/models", "GET"},
    {"/metrics", "GET"},
    {"/health", "GET"},
};

// The route a path belongs to, or null.
const Route* FindRoute(absl::string_view path) {
  for (const Route& route : kRoutes) {
    if (path == route.path) return &route;
  }
  static constexpr Route kModel = {kModelsPrefix, "GET"};
  if (absl::StartsWith(path, kModelsPrefix) && path.size() > sizeof(kModelsPrefix) - 1) {
    return &kModel;
  }
  return nullptr;
}

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json ModelObject(const ModelFile& file) {
  struct stat st;
  const int64_t created = stat(file.path.c_str(), &st) == 0 ? st.st_mtime : 0;
  return {{"id", file.name}, {"object", "model"}, {"created", created}, {"owned_by", "waste"}};
}

void RespondError(Exchange& exchange, const ApiError& error) {
  exchange.Respond(error.status, kJson, error.ToJson());
}

}  // namespace

Router::Router(RouterContext context) : context_(std::move(context)) {}

std::string Router::EndpointLabel(absl::string_view path) {
  const Route* route = FindRoute(path);
  if (route == nullptr) return "other";
  return route->path == kModelsPrefix ? "/v1/models/{id}" : route->path;
}

std::optional<Refusal> Router::Precheck(absl::string_view method, absl::string_view path,
                                        absl::string_view authorization) const {
  const Route* route = FindRoute(path);
  if (route == nullptr) {
    ApiError error{.status = 404,
                   .type = "invalid_request_error",
                   .message = absl::StrCat("no endpoint ", path,
                                           " (see /v1/chat/completions, /v1/completions, "
                                           "/v1/models, /metrics, /health)"),
                   .param = "",
                   .code = "unknown_url"};
    return Refusal{std::move(error), {}};
  }
  if (method != route->method) {
    ApiError error{.status = 405,
                   .type = "invalid_request_error",
                   .message = absl::StrCat(path, " takes ", route->method, ", not ", method),
                   .param = "",
                   .code = "method_not_allowed"};
    return Refusal{std::move(error), {{"Allow", route->method}}};
  }
  if (path != "/health" && !Authorized(context_.api_key, authorization)) {
    ApiError error{.status = 401,
                   .type = "authentication_error",
                   .message = BearerToken(authorization).has_value()
                                  ? "incorrect API key"
                                  : "this server wants an API key: send Authorization: Bearer KEY",
                   .param = "",
                   .code = "invalid_api_key"};
    return Refusal{std::move(error), {{"WWW-Authenticate", "Bearer"}}};
  }
  return std::nullopt;
}

void Router::Handle(const HttpRequest& request, std::shared_ptr<Exchange> exchange) {
  const absl::string_view path = request.path;
  if (path == "/health") {
    if (draining_.load()) {
      exchange->Respond(503, kJson, R"({"status":"shutting_down"})");
    } else {
      exchange->Respond(200, kJson, R"({"status":"ok"})");
    }
  } else if (path == "/v1/chat/completions" || path == "/v1/completions") {
    CompletionRequest completion;
    ApiError error;
    const ApiKind kind = path == "/v1/completions" ? ApiKind::kCompletion : ApiKind::kChat;
    if (!ParseCompletionRequest(kind, request.body, &completion, &error)) {
      RespondError(*exchange, error);
      return;
    }
    StartCompletion({.engine = context_.engine,
                     .metrics = context_.metrics,
                     .pending = context_.pending,
                     .run_blocking = context_.run_blocking},
                    std::move(completion), std::move(exchange));
  } else if (path == "/v1/models") {
    ListModels(std::move(exchange));
  } else if (absl::StartsWith(path, kModelsPrefix)) {
    GetModel(std::string(path.substr(sizeof(kModelsPrefix) - 1)), std::move(exchange));
  } else if (path == "/metrics") {
    Metrics(std::move(exchange));
  } else {
    // Precheck lets only the paths above through.
    RespondError(*exchange, ErrorFromStatus(absl::NotFoundError("no such endpoint")));
  }
}

void Router::ListModels(std::shared_ptr<Exchange> exchange) {
  // Scanning the models directories is file I/O.
  context_.run_blocking([this, exchange] {
    Json data = Json::array();
    for (const ModelFile& file : context_.engine->catalog().Scan()) {
      data.push_back(ModelObject(file));
    }
    std::string body = Dump({{"object", "list"}, {"data", std::move(data)}});
    exchange->Post([exchange, body = std::move(body)]() mutable {
      exchange->Respond(200, kJson, std::move(body));
    });
  });
}

void Router::GetModel(std::string id, std::shared_ptr<Exchange> exchange) {
  context_.run_blocking([this, id = std::move(id), exchange] {
    absl::StatusOr<ModelFile> file = context_.engine->catalog().Find(id);
    ApiError error;
    std::string body;
    if (file.ok()) {
      body = Dump(ModelObject(*file));
    } else {
      error = ErrorFromStatus(file.status());
      body = error.ToJson();
    }
    const int status = file.ok() ? 200 : error.status;
    exchange->Post([exchange, status, body = std::move(body)]() mutable {
      exchange->Respond(status, kJson, std::move(body));
    });
  });
}

void Router::Metrics(std::shared_ptr<Exchange> exchange) {
  // Reads every model's counters (taking their locks) and scans the
  // models directories.
  context_.run_blocking([this, exchange] {
    std::string page = RenderMetricsPage(*context_.engine, context_.metrics, context_.started);
    exchange->Post([exchange, page = std::move(page)]() mutable {
      exchange->Respond(200, metrics::kPrometheusContentType, std::move(page));
    });
  });
}

}  // namespace waste::http
