#include "tools/serve/StructuredOutputRequest.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "tools/serve/ApiError.h"
#include "tools/serve/JsonFields.h"

namespace kvjit::serve {
namespace {

// Schemas keep their key order: it is the order a schema's properties are
// written in the output.
using Json = nlohmann::ordered_json;

using Kind = grammar::GrammarSpec::Kind;

// A JSON schema given as an object (or a boolean schema), kept as text.
absl::StatusOr<std::string> SchemaText(const Json& schema, const std::string& field) {
  if (!schema.is_object() && !schema.is_boolean()) {
    return FieldError(field, absl::StrCat("must be a JSON schema (an object), got ",
                                          JsonTypeName(schema)));
  }
  return schema.dump();
}

absl::StatusOr<std::string> NonEmptyString(const Json& value, const std::string& field) {
  if (!value.is_string()) {
    return FieldError(field, absl::StrCat("must be a string, got ", JsonTypeName(value)));
  }
  if (value.get<std::string>().empty()) return FieldError(field, "is empty");
  return value.get<std::string>();
}

absl::StatusOr<std::optional<StructuredOutput>> ReadResponseFormat(const Json& format) {
  const std::string field = "response_format";
  if (!format.is_object()) {
    return FieldError(field, absl::StrCat("must be an object, got ", JsonTypeName(format)));
  }
  const Json* type = format.contains("type") ? &format.at("type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return FieldError(field, "needs a type: \"text\", \"json_object\" or \"json_schema\"");
  }
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") return StructuredOutput{{Kind::kJsonObject, "", {}}, field};
  if (*type != "json_schema") {
    return FieldError(field, absl::StrCat("type must be \"text\", \"json_object\" or "
                                          "\"json_schema\", got ", type->dump()));
  }
  const Json* json_schema = format.contains("json_schema") ? &format.at("json_schema") : nullptr;
  if (json_schema == nullptr || !json_schema->is_object()) {
    return FieldError(field, "of type json_schema needs a json_schema object");
  }
  if (!json_schema->contains("schema") || json_schema->at("schema").is_null()) {
    return FieldError(field, "json_schema.schema is required");
  }
  absl::StatusOr<std::string> schema =
      SchemaText(json_schema->at("schema"), field + ".json_schema.schema");
  if (!schema.ok()) return schema.status();
  return StructuredOutput{{Kind::kJsonSchema, *std::move(schema), {}}, field};
}

absl::StatusOr<std::optional<StructuredOutput>> ReadVllmStructuredOutputs(const Json& options) {
  const std::string field = "structured_outputs";
  if (!options.is_object()) {
    return FieldError(field, absl::StrCat("must be an object, got ", JsonTypeName(options)));
  }
  std::vector<std::string> kinds;
  std::optional<StructuredOutput> output;
  for (const auto& [key, value] : options.items()) {
    if (value.is_null() || (value.is_boolean() && !value.get<bool>())) continue;
    const std::string key_field = absl::StrCat(field, ".", key);
    grammar::GrammarSpec spec;
    if (key == "json") {
      spec.kind = Kind::kJsonSchema;
      if (value.is_string()) {
        Json parsed = Json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (parsed.is_discarded()) return FieldError(key_field, "is not valid JSON");
        absl::StatusOr<std::string> schema = SchemaText(parsed, key_field);
        if (!schema.ok()) return schema.status();
        spec.text = *std::move(schema);
      } else {
        absl::StatusOr<std::string> schema = SchemaText(value, key_field);
        if (!schema.ok()) return schema.status();
        spec.text = *std::move(schema);
      }
    } else if (key == "regex" || key == "grammar") {
      spec.kind = key == "regex" ? Kind::kRegex : Kind::kEbnf;
      absl::StatusOr<std::string> text = NonEmptyString(value, key_field);
      if (!text.ok()) return text.status();
      spec.text = *std::move(text);
    } else if (key == "choice") {
      spec.kind = Kind::kChoice;
      if (!value.is_array() || value.empty()) {
        return FieldError(key_field, "must be a non-empty list of strings");
      }
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_string()) {
          return FieldError(key_field, absl::StrCat("element ", i, " must be a string, got ",
                                                    JsonTypeName(value[i])));
        }
        spec.choices.push_back(value[i].get<std::string>());
      }
    } else if (key == "json_object") {
      if (!value.is_boolean()) {
        return FieldError(key_field, absl::StrCat("must be a boolean, got ", JsonTypeName(value)));
      }
      spec.kind = Kind::kJsonObject;
    } else {
      return FieldError(key_field, "is not supported by this server (it offers json, regex, "
                                   "choice, grammar and json_object)");
    }
    kinds.push_back(key);
    output = StructuredOutput{std::move(spec), key_field};
  }
  if (kinds.size() > 1) {
    return FieldError(field, absl::StrCat("asks for ", absl::StrJoin(kinds, " and "),
                                          "; give one of them"));
  }
  return output;
}

}  // namespace

absl::StatusOr<std::optional<StructuredOutput>> ReadStructuredOutput(
    const nlohmann::ordered_json& request) {
  if (!request.is_object()) return std::nullopt;
  std::vector<std::string> given;
  std::optional<StructuredOutput> output;
  const auto take = [&](absl::StatusOr<std::optional<StructuredOutput>> read,
                        const char* name) -> absl::Status {
    if (!read.ok()) return read.status();
    if (read->has_value()) {
      given.push_back(name);
      output = **std::move(read);
    }
    return absl::OkStatus();
  };
  if (const Json* format = FindJsonField(request, "response_format")) {
    if (absl::Status status = take(ReadResponseFormat(*format), "response_format"); !status.ok()) {
      return status;
    }
  }
  if (const Json* options = FindJsonField(request, "structured_outputs")) {
    if (absl::Status status = take(ReadVllmStructuredOutputs(*options), "structured_outputs");
        !status.ok()) {
      return status;
    }
  }
  if (const Json* schema = FindJsonField(request, "json_schema")) {
    absl::StatusOr<std::string> text = SchemaText(*schema, "json_schema");
    if (!text.ok()) return text.status();
    given.push_back("json_schema");
    output = StructuredOutput{{Kind::kJsonSchema, *std::move(text), {}}, "json_schema"};
  }
  if (const Json* ebnf = FindJsonField(request, "grammar")) {
    absl::StatusOr<std::string> text = NonEmptyString(*ebnf, "grammar");
    if (!text.ok()) return text.status();
    given.push_back("grammar");
    output = StructuredOutput{{Kind::kEbnf, *std::move(text), {}}, "grammar"};
  }
  if (given.size() > 1) {
    return FieldError(given[1], absl::StrCat("and ", given[0],
                                             " each constrain the output; give one of them"));
  }
  return output;
}

}  // namespace kvjit::serve
