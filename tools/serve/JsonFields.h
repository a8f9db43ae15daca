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

// The JSON type of `value` as an error message says it: "a string",
// "an object", ...
const char* JsonTypeName(const nlohmann::json& value);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_JSONFIELDS_H_
