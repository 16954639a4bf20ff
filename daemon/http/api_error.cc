#include "daemon/http/api_error.h"

#include <nlohmann/json.hpp>

namespace waste::http {

std::string ApiError::ToJson() const {
  nlohmann::json error = {
      {"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) error["param"] = param;
  if (!code.empty()) error["code"] = code;
  return nlohmann::json{{"error", std::move(error)}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
}

ApiError BadRequest(std::string message, std::string param) {
  return ApiError{.status = 400,
                  .type = "invalid_request_error",
                  .message = std::move(message),
                  .param = std::move(param),
                  .code = ""};
}

ApiError ErrorFromStatus(const absl::Status& status) {
  ApiError error;
  error.message = std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      error.status = 400;
      error.type = "invalid_request_error";
      break;
    case absl::StatusCode::kNotFound:
      error.status = 404;
      error.type = "invalid_request_error";
      error.code = "model_not_found";
      break;
    case absl::StatusCode::kResourceExhausted:
      error.status = 429;
      error.type = "rate_limit_error";
      error.code = "queue_full";
      break;
    case absl::StatusCode::kUnavailable:
      error.status = 503;
      error.type = "server_error";
      error.code = "unavailable";
      break;
    case absl::StatusCode::kUnauthenticated:
      error.status = 401;
      error.type = "authentication_error";
      error.code = "invalid_api_key";
      break;
    case absl::StatusCode::kPermissionDenied:
      error.status = 403;
      error.type = "permission_error";
      break;
    default:
      error.status = 500;
      error.type = "server_error";
      break;
  }
  return error;
}

}  // namespace waste::http
