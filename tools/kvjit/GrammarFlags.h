#ifndef KVJIT_TOOLS_KVJIT_GRAMMARFLAGS_H_
#define KVJIT_TOOLS_KVJIT_GRAMMARFLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "runtime/grammar/GrammarSpec.h"

// Structured output for the subcommands that decode one prompt (run, chat).
ABSL_DECLARE_FLAG(std::string, json_schema);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(std::string, grammar);
ABSL_DECLARE_FLAG(std::string, regex);

namespace kvjit::cli {

// `names` and the flags above, for --help (Subcommand::shared_flags).
std::vector<std::string> WithGrammarFlags(std::vector<std::string> names);

// The grammar --json_schema FILE, --json, --grammar FILE or --regex R ask
// for, at most one of them; nullopt when none is given. An error names the
// flags given together or the file that cannot be read.
absl::StatusOr<std::optional<grammar::GrammarSpec>> GrammarFromFlags();

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_GRAMMARFLAGS_H_
