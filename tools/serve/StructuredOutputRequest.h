#ifndef KVJIT_TOOLS_SERVE_STRUCTUREDOUTPUTREQUEST_H_
#define KVJIT_TOOLS_SERVE_STRUCTUREDOUTPUTREQUEST_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/grammar/GrammarSpec.h"
#include "nlohmann/json.hpp"

namespace kvjit::serve {

// What a request's output must match, and the request field that said so
// (the `param` of the error when the grammar does not compile).
struct StructuredOutput {
  grammar::GrammarSpec spec;
  std::string field;
};

// Reads the fields clients ask for structured output with, at most one of
// them:
// - OpenAI's `response_format`: {"type": "text"} (none), {"type":
//   "json_object"}, or {"type": "json_schema", "json_schema": {"schema":
//   {...}, ...}};
// - vLLM's `structured_outputs`: one of `json` (a schema, or its text),
//   `regex`, `choice` (a list of strings), `grammar` (EBNF), `json_object`;
// - llama.cpp's `json_schema` (a schema) and `grammar` (GBNF).
// An error names the field that is malformed, a second field asking too,
// or a vLLM setting this server does not offer.
// `request` is the body read as ordered JSON, so that schemas keep their key
// order.
absl::StatusOr<std::optional<StructuredOutput>> ReadStructuredOutput(
    const nlohmann::ordered_json& request);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_STRUCTUREDOUTPUTREQUEST_H_
