#ifndef KVJIT_TOOLS_SERVE_TEMPLATE_LEXER_H_
#define KVJIT_TOOLS_SERVE_TEMPLATE_LEXER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

// Splits a template into tokens as jinja2's lexer does with
// trim_blocks=True and lstrip_blocks=True: text between tags (whitespace
// control already applied), tag delimiters, and the names, literals and
// operators inside tags. Comments are dropped.
namespace kvjit::chat_template {

enum class TokenKind {
  kText,
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,   // value unescaped
  kInteger,  // value as written, '_' removed
  kFloat,
  kOperator,  // value: "+", "==", "(", ...
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string value;
  int line;
};

// A description of `token` for messages ("'}}'", "end of print statement").
std::string DescribeToken(const Token& token);

// The tokens of `source`, ending with kEnd; errors read "line N: ...".
absl::StatusOr<std::vector<Token>> Tokenize(const std::string& source);

}  // namespace kvjit::chat_template

#endif  // KVJIT_TOOLS_SERVE_TEMPLATE_LEXER_H_
