#include "runtime/grammar/GrammarSpec.h"

namespace kvjit::grammar {

absl::string_view GrammarKindName(GrammarSpec::Kind kind) {
  switch (kind) {
    case GrammarSpec::Kind::kJsonObject:
      return "json_object";
    case GrammarSpec::Kind::kJsonSchema:
      return "json_schema";
    case GrammarSpec::Kind::kRegex:
      return "regex";
    case GrammarSpec::Kind::kChoice:
      return "choice";
    case GrammarSpec::Kind::kEbnf:
      return "grammar";
    case GrammarSpec::Kind::kTaggedJson:
      return "tagged_json";
  }
  return "grammar";
}

}  // namespace kvjit::grammar
