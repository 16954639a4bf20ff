// Early-return helpers for absl::Status / absl::StatusOr, as used across
// storage/ and daemon/.
//
//   RETURN_IF_ERROR(file->Read(offset, n, buf));
//   ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(env, path));
#ifndef WASTE_COMMON_STATUS_MACROS_H_
#define WASTE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define WASTE_STATUS_CONCAT_INNER_(a, b) a##b
#define WASTE_STATUS_CONCAT_(a, b) WASTE_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status waste_status_ = (expr);         \
    if (!waste_status_.ok()) return waste_status_; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  WASTE_ASSIGN_OR_RETURN_IMPL_(WASTE_STATUS_CONCAT_(waste_statusor_, __LINE__), lhs, expr)

#define WASTE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return statusor.status();           \
  lhs = std::move(statusor).value()

#endif  // WASTE_COMMON_STATUS_MACROS_H_
