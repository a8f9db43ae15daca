#include "tools/serve/ToolRequest.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "tools/serve/ApiError.h"
#include "tools/serve/JsonFields.h"

namespace kvjit::serve {
namespace {

using Json = nlohmann::ordered_json;

// OpenAI's rule for function names.
bool IsFunctionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

absl::Status CheckTool(const Json& tool, const std::string& field, std::set<std::string>& names) {
  if (!tool.is_object() || FindJsonField(tool, "type") == nullptr || tool.at("type") != "function") {
    return FieldError(field, "must be {\"type\": \"function\", \"function\": {...}}");
  }
  const Json* function = FindJsonField(tool, "function");
  if (function == nullptr || !function->is_object()) {
    return FieldError(field + ".function", "must be an object");
  }
  const Json* name = FindJsonField(*function, "name");
  if (name == nullptr || !name->is_string() || !IsFunctionName(name->get<std::string>())) {
    return FieldError(field + ".function.name",
                      "must be 1 to 64 letters, digits, underscores or dashes");
  }
  if (!names.insert(name->get<std::string>()).second) {
    return FieldError(field + ".function.name",
                      absl::StrCat("'", name->get<std::string>(), "' names an earlier tool too"));
  }
  const Json* parameters = FindJsonField(*function, "parameters");
  if (parameters != nullptr && !parameters->is_object()) {
    return FieldError(field + ".function.parameters", "must be a JSON schema (an object)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ToolRequest> ReadToolRequest(const nlohmann::ordered_json& json, bool chat) {
  ToolRequest request;
  if (!json.is_object()) return request;
  const Json* tools = FindJsonField(json, "tools");
  const Json* choice = FindJsonField(json, "tool_choice");
  if (tools != nullptr) {
    if (!tools->is_array()) return FieldError("tools", "must be a list");
    if (!tools->empty() && !chat) {
      return FieldError("tools", "is offered by /v1/chat/completions, not /v1/completions");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      if (absl::Status status = CheckTool((*tools)[i], absl::StrCat("tools[", i, "]"), names);
          !status.ok()) {
        return status;
      }
    }
    request.tools = *tools;
  }
  if (const Json* parallel = FindJsonField(json, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) return FieldError("parallel_tool_calls", "must be a boolean");
    request.parallel_tool_calls = parallel->get<bool>();
  }
  if (choice == nullptr) return request;
  if (choice->is_string()) {
    const std::string value = choice->get<std::string>();
    if (value == "auto") {
      request.choice = ToolRequest::Choice::kAuto;
    } else if (value == "none") {
      request.choice = ToolRequest::Choice::kNone;
    } else if (value == "required") {
      request.choice = ToolRequest::Choice::kRequired;
    } else {
      return FieldError("tool_choice", absl::StrCat("must be \"auto\", \"none\", \"required\" or "
                                                    "a function, got \"", value, "\""));
    }
  } else {
    const Json* function = choice->is_object() ? FindJsonField(*choice, "function") : nullptr;
    const Json* name = function != nullptr && function->is_object() ? FindJsonField(*function, "name")
                                                                     : nullptr;
    if (name == nullptr || !name->is_string()) {
      return FieldError("tool_choice", "must be \"auto\", \"none\", \"required\" or "
                                       "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    request.choice = ToolRequest::Choice::kNamed;
    request.named_function = name->get<std::string>();
    bool offered = false;
    for (const Json& tool : request.tools) offered |= tool["function"]["name"] == *name;
    if (!offered) {
      return FieldError("tool_choice", absl::StrCat("names '", request.named_function,
                                                    "', which is not among the tools"));
    }
  }
  if (request.tools.empty() && request.choice != ToolRequest::Choice::kNone &&
      request.choice != ToolRequest::Choice::kAuto) {
    return FieldError("tool_choice", "asks for a function call, but the request has no tools");
  }
  return request;
}

}  // namespace kvjit::serve
