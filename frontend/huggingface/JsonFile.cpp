#include "frontend/huggingface/JsonFile.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvjit::hf {

absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source) {
  // The throwing parser is used only for its message, which says where the
  // text went wrong; nothing else here throws.
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON: ", error.what()));
  }
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream contents;
  contents << stream.rdbuf();
  if (stream.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return ParseJson(contents.str(), path);
}

const nlohmann::json* FindField(const nlohmann::json& object, absl::string_view key) {
  if (!object.is_object()) return nullptr;
  auto found = object.find(std::string(key));
  return found == object.end() ? nullptr : &*found;
}

std::string Describe(const nlohmann::json& value) {
  if (value.is_array()) return "a list";
  if (value.is_object()) return "an object";
  return value.dump();
}

absl::StatusOr<int64_t> NonNegativeInteger(const nlohmann::json& value, absl::string_view what) {
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(value.get<uint64_t>());
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return value.get<int64_t>();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be a non-negative integer, got ", Describe(value)));
}

}  // namespace kvjit::hf
