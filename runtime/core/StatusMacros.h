#ifndef KVJIT_RUNTIME_CORE_STATUSMACROS_H_
#define KVJIT_RUNTIME_CORE_STATUSMACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns the status of `expr` (an absl::Status) from the enclosing function
// when it is not OK.
#define KVJIT_RETURN_IF_ERROR(expr)                       \
  do {                                                    \
    ::absl::Status kvjit_status_ = (expr);                \
    if (!kvjit_status_.ok()) return kvjit_status_;        \
  } while (false)

// `lhs` may declare a variable: KVJIT_ASSIGN_OR_RETURN(auto x, MakeX());
#define KVJIT_ASSIGN_OR_RETURN(lhs, expr) \
  KVJIT_ASSIGN_OR_RETURN_IMPL(KVJIT_STATUS_CONCAT(kvjit_status_or_, __LINE__), lhs, expr)

#define KVJIT_ASSIGN_OR_RETURN_IMPL(temporary, lhs, expr) \
  auto temporary = (expr);                                \
  if (!temporary.ok()) return temporary.status();         \
  lhs = *std::move(temporary)

#define KVJIT_STATUS_CONCAT(a, b) KVJIT_STATUS_CONCAT_INNER(a, b)
#define KVJIT_STATUS_CONCAT_INNER(a, b) a##b

#endif  // KVJIT_RUNTIME_CORE_STATUSMACROS_H_
