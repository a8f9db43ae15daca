#ifndef KVJIT_RUNTIME_GRAMMAR_GRAMMARSPEC_H_
#define KVJIT_RUNTIME_GRAMMAR_GRAMMARSPEC_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace kvjit::grammar {

// What a request's output must match, in the forms the OpenAI API, vLLM and
// llama.cpp accept.
struct GrammarSpec {
  enum class Kind {
    kJsonObject,  // any JSON object (OpenAI's response_format json_object)
    kJsonSchema,  // `text` is a JSON schema
    kRegex,       // `text` is a regular expression the whole output matches
    kChoice,      // the output is exactly one of `choices`
    kEbnf,        // `text` is a grammar in GBNF/EBNF with a `root` rule
    // 1 to `max_repeats` items joined by `separator`, each `prefix`, JSON
    // valid under the schema `text`, then `suffix` (function calls in a
    // model's format: <tool_call>{...}</tool_call>, [TOOL_CALLS][...]).
    kTaggedJson,
  };

  GrammarSpec() = default;
  GrammarSpec(Kind kind, std::string text, std::vector<std::string> choices = {})
      : kind(kind), text(std::move(text)), choices(std::move(choices)) {}

  Kind kind = Kind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;
  // kTaggedJson only.
  std::string prefix;
  std::string suffix;
  std::string separator;
  int max_repeats = 1;
};

// "json_object", "json_schema", "regex", "choice", "grammar": how errors name
// the kind.
absl::string_view GrammarKindName(GrammarSpec::Kind kind);

}  // namespace kvjit::grammar

#endif  // KVJIT_RUNTIME_GRAMMAR_GRAMMARSPEC_H_
