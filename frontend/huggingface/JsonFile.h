#ifndef KVJIT_FRONTEND_SAFETENSORS_JSONFILE_H_
#define KVJIT_FRONTEND_SAFETENSORS_JSONFILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace kvjit::hf {

// Parses JSON text; `source` (a path or file name) leads every error message.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source);

// Reads and parses a JSON file; errors name `path`.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// The field `key` of `object`; nullptr where `object` is not an object or
// lacks the key.
const nlohmann::json* FindField(const nlohmann::json& object, absl::string_view key);

// `value` for an error message: scalars as JSON text, containers by kind
// only (they can be large, and nested deeper than is safe to print).
std::string Describe(const nlohmann::json& value);

// Reads `value` as an integer in [0, INT64_MAX]; `what` names it in the error
// (for example "config.json: hidden_size").
absl::StatusOr<int64_t> NonNegativeInteger(const nlohmann::json& value, absl::string_view what);

}  // namespace kvjit::hf

#endif  // KVJIT_FRONTEND_SAFETENSORS_JSONFILE_H_
