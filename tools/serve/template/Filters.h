#ifndef KVJIT_TOOLS_SERVE_TEMPLATE_FILTERS_H_
#define KVJIT_TOOLS_SERVE_TEMPLATE_FILTERS_H_

#include <string>

#include "absl/status/statusor.h"
#include "tools/serve/template/Value.h"

// jinja2's built-in filters and tests (the subset chat templates use), with
// Hugging Face's tojson (json.dumps with ensure_ascii=False).
namespace kvjit::chat_template {

bool HasFilter(const std::string& name);
bool HasTest(const std::string& name);

// operand | name(arguments); errors without a line.
absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& operand, CallArguments& arguments);
// operand is name(arguments).
absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& operand, CallArguments& arguments);

}  // namespace kvjit::chat_template

#endif  // KVJIT_TOOLS_SERVE_TEMPLATE_FILTERS_H_
