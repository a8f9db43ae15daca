#ifndef KVJIT_TOOLS_SERVE_APIERROR_H_
#define KVJIT_TOOLS_SERVE_APIERROR_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

// Errors the server answers with, as absl::Status values: the code picks the
// HTTP status and the OpenAI error type, and a payload names the request
// field at fault (the error object's `param`).
namespace kvjit::serve {

// An InvalidArgument error about request field `field`: "field: message".
absl::Status FieldError(absl::string_view field, absl::string_view message);

// `status` with `field` recorded as the field at fault (kept if it has one).
absl::Status WithField(absl::Status status, absl::string_view field);

// The field FieldError or WithField recorded, if any.
std::optional<std::string> ErrorField(const absl::Status& status);

// 400 for a request that cannot run as asked (InvalidArgument, OutOfRange,
// FailedPrecondition), 401 Unauthenticated, 404 NotFound, 429
// ResourceExhausted (the queue is full), 503 Unavailable, 500 otherwise.
int HttpStatusFor(const absl::Status& status);

// The body OpenAI's API answers an error with:
// {"error": {"message", "type", "param", "code"}}, code being the HTTP
// status: `http_status`, or HttpStatusFor(status) when 0.
nlohmann::json ErrorBody(const absl::Status& status, int http_status = 0);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_APIERROR_H_
