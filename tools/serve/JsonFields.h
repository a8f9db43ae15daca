#ifndef KVJIT_TOOLS_SERVE_JSONFIELDS_H_
#define KVJIT_TOOLS_SERVE_JSONFIELDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace kvjit::serve {

// Typed reads of a JSON object's optional fields, each error a FieldError
// naming the field. A field that is absent or null is not given (nullopt):
// clients send null for "the default".
class JsonFields {
 public:
  // `object` must be a JSON object and outlive this.
  explicit JsonFields(const nlohmann::json& object) : object_(object) {}

  // The field's value; null when absent or null.
  const nlohmann::json* Find(absl::string_view name) const;

  // Any JSON number.
  absl::StatusOr<std::optional<double>> Number(absl::string_view name) const;
  // A JSON integer in int64 range (2.0 is not one).
  absl::StatusOr<std::optional<int64_t>> Integer(absl::string_view name) const;
  absl::StatusOr<std::optional<bool>> Bool(absl::string_view name) const;
  absl::StatusOr<std::optional<std::string>> String(absl::string_view name) const;

 private:
  const nlohmann::json& object_;
};

// A JSON type as an error message says it: "a string", "an object", ...
const char* JsonTypeName(nlohmann::json::value_t type);

// The JSON type of `value` (nlohmann::json, or ordered_json where the key
// order matters) as an error message says it.
template <class BasicJson>
const char* JsonTypeName(const BasicJson& value) {
  return JsonTypeName(value.type());
}

// `object`'s field `name`; null when absent or null (clients send null for
// "the default"). For nlohmann::json and ordered_json alike.
template <class BasicJson>
const BasicJson* FindJsonField(const BasicJson& object, absl::string_view name) {
  const auto it = object.find(std::string(name));
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_JSONFIELDS_H_
