#ifndef KVJIT_TOOLS_SERVE_TEMPLATE_EVALUATOR_H_
#define KVJIT_TOOLS_SERVE_TEMPLATE_EVALUATOR_H_

#include <ctime>
#include <string>

#include "absl/status/status.h"
#include "tools/serve/template/Ast.h"
#include "tools/serve/template/Value.h"

// Renders a parsed template as jinja2 does: Jinja's scoping (a for loop's
// body is a new scope each iteration, if is none, a macro sees the template's
// top level), Undefined values, loop variables, namespaces, macros and the
// globals Hugging Face's apply_chat_template provides.
namespace kvjit::chat_template {

// The time strftime_now formats (the current time where null).
struct EvaluationOptions {
  const std::time_t* now = nullptr;
};

// Appends the render of `body` with `context` (a dict of the template's
// variables) to `out`. Errors read "line N: message"; raise_exception's
// error is exactly its message.
absl::Status Evaluate(const Body& body, const Value& context, const EvaluationOptions& options, std::string& out);

// A syntax tree's filters and tests that jinja2 would reject when it
// compiles the template ("line N: No filter named 'x'.").
absl::Status CheckNames(const Body& body);

// Whether `status` is a template's raise_exception (its message is the
// template's own).
bool IsTemplateException(const absl::Status& status);

}  // namespace kvjit::chat_template

#endif  // KVJIT_TOOLS_SERVE_TEMPLATE_EVALUATOR_H_
