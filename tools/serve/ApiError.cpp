#include "tools/serve/ApiError.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace kvjit::serve {
namespace {

constexpr absl::string_view kFieldPayload = "kvjit.serve/field";

}  // namespace

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return WithField(absl::InvalidArgumentError(absl::StrCat(field, ": ", message)), field);
}

absl::Status WithField(absl::Status status, absl::string_view field) {
  if (!status.ok() && !status.GetPayload(kFieldPayload).has_value()) {
    status.SetPayload(kFieldPayload, absl::Cord(field));
  }
  return status;
}

std::optional<std::string> ErrorField(const absl::Status& status) {
  const auto field = status.GetPayload(kFieldPayload);
  if (!field.has_value()) return std::nullopt;
  return std::string(*field);
}

int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

nlohmann::json ErrorBody(const absl::Status& status, int http_status) {
  if (http_status == 0) http_status = HttpStatusFor(status);
  const char* type = http_status == 401   ? "authentication_error"
                     : http_status == 429 ? "rate_limit_error"
                     : http_status >= 500 ? "server_error"
                                          : "invalid_request_error";
  nlohmann::json error = {{"message", std::string(status.message())},
                          {"type", type},
                          {"param", nullptr},
                          {"code", http_status}};
  if (std::optional<std::string> field = ErrorField(status)) error["param"] = *field;
  return {{"error", std::move(error)}};
}

}  // namespace kvjit::serve
