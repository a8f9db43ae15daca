#ifndef KVJIT_TOOLS_SERVE_TEMPLATE_PARSER_H_
#define KVJIT_TOOLS_SERVE_TEMPLATE_PARSER_H_

#include <string>

#include "absl/status/statusor.h"
#include "tools/serve/template/Ast.h"

namespace kvjit::chat_template {

// The syntax tree of `source` (the lexer's tokens, parsed as jinja2 parses
// them); a syntax error reads "line N: <what jinja2 would say>".
absl::StatusOr<Body> ParseTemplate(const std::string& source);

}  // namespace kvjit::chat_template

#endif  // KVJIT_TOOLS_SERVE_TEMPLATE_PARSER_H_
