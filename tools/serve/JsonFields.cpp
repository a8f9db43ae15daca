#include "tools/serve/JsonFields.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "tools/serve/ApiError.h"

namespace kvjit::serve {

const char* JsonTypeName(nlohmann::json::value_t type) {
  switch (type) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "an integer";
    case nlohmann::json::value_t::number_float:
      return "a number";
    default:
      return "an unexpected value";
  }
}

const nlohmann::json* JsonFields::Find(absl::string_view name) const {
  return FindJsonField(object_, name);
}

absl::StatusOr<std::optional<double>> JsonFields::Number(absl::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) {
    return FieldError(name, absl::StrCat("must be a number, got ", JsonTypeName(*value)));
  }
  return value->get<double>();
}

absl::StatusOr<std::optional<int64_t>> JsonFields::Integer(absl::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned()) {
    const uint64_t unsigned_value = value->get<uint64_t>();
    if (unsigned_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return FieldError(name, absl::StrCat(unsigned_value, " is out of range"));
    }
    return static_cast<int64_t>(unsigned_value);
  }
  if (!value->is_number_integer()) {
    return FieldError(name, absl::StrCat("must be an integer, got ", JsonTypeName(*value)));
  }
  return value->get<int64_t>();
}

absl::StatusOr<std::optional<bool>> JsonFields::Bool(absl::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) {
    return FieldError(name, absl::StrCat("must be true or false, got ", JsonTypeName(*value)));
  }
  return value->get<bool>();
}

absl::StatusOr<std::optional<std::string>> JsonFields::String(absl::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    return FieldError(name, absl::StrCat("must be a string, got ", JsonTypeName(*value)));
  }
  return value->get<std::string>();
}

}  // namespace kvjit::serve
