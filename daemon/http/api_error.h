// Errors of the HTTP face in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// with the HTTP status that goes with them. Engine errors (absl::Status)
// map to statuses here and nowhere else.
#ifndef WASTE_DAEMON_HTTP_API_ERROR_H_
#define WASTE_DAEMON_HTTP_API_ERROR_H_

#include <string>

#include "absl/status/status.h"

namespace waste::http {

struct ApiError {
  int status = 500;     // HTTP status.
  std::string type;     // invalid_request_error, authentication_error, ...
  std::string message;  // What is wrong and what to do.
  std::string param;    // The request field at fault; "" -> null.
  std::string code;     // A stable machine-readable code; "" -> null.

  // The JSON error object.
  std::string ToJson() const;
};

// 400 for a request field: `param` names it.
ApiError BadRequest(std::string message, std::string param = "");

// An engine error as the client sees it: INVALID_ARGUMENT and OUT_OF_RANGE
// 400, NOT_FOUND 404, RESOURCE_EXHAUSTED (the model's queue is full) 429,
// UNAVAILABLE 503, UNAUTHENTICATED 401, PERMISSION_DENIED 403, anything
// else 500.
ApiError ErrorFromStatus(const absl::Status& status);

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_API_ERROR_H_
