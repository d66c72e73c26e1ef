// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status (our abseil predates absl's own macros).
#ifndef SLURM_DDP_COMMON_STATUS_MACROS_H_
#define SLURM_DDP_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DDP_STATUS_CONCAT_INNER_(a, b) a##b
#define DDP_STATUS_CONCAT_(a, b) DDP_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status ddp_status_ = (expr);       \
    if (!ddp_status_.ok()) return ddp_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, Foo());  `lhs` receives the value of a StatusOr, or the error returns.
#define ASSIGN_OR_RETURN(lhs, expr) \
  DDP_ASSIGN_OR_RETURN_IMPL_(DDP_STATUS_CONCAT_(ddp_statusor_, __LINE__), lhs, expr)
#define DDP_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)    \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // SLURM_DDP_COMMON_STATUS_MACROS_H_
