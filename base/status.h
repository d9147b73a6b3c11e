// Status helpers shared by every layer. Errors are absl::Status / StatusOr;
// messages name the culprit (node, attr, file, task).
#ifndef STRATA_BASE_STATUS_H_
#define STRATA_BASE_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define STRATA_STATUS_CONCAT_INNER_(a, b) a##b
#define STRATA_STATUS_CONCAT_(a, b) STRATA_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define STRATA_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::absl::Status strata_status_ = (expr);     \
    if (!strata_status_.ok()) return strata_status_; \
  } while (0)

// `lhs = value of expr (a StatusOr)`, or return its error.
#define STRATA_ASSIGN_OR_RETURN(lhs, expr) \
  STRATA_ASSIGN_OR_RETURN_IMPL_(STRATA_STATUS_CONCAT_(strata_sor_, __LINE__), lhs, expr)
#define STRATA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

namespace strata {

// Returns `s` with `prefix` put before its message, keeping its code.
inline absl::Status AnnotateStatus(const absl::Status& s, absl::string_view prefix) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

}  // namespace strata

#endif  // STRATA_BASE_STATUS_H_
