#ifndef KVJIT_TOOLS_KVJIT_COMPILERCOMMANDS_H_
#define KVJIT_TOOLS_KVJIT_COMPILERCOMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/kvjit/Subcommand.h"

// kvjit is two programs: `kvjit`, which runs executables and links the
// runtime alone, and `kvjit-compiler` beside it, which links MLIR and LLVM
// and runs the subcommands that need them. So running a model never loads
// the compiler (about 55 MiB resident and a tenth of a second of start-up):
// `kvjit compile …` hands itself over to kvjit-compiler, and `kvjit run
// MODEL.gguf` runs it as a child only when the model is not compiled yet.
namespace kvjit::cli {

// The subcommands kvjit-compiler runs, described once for both programs
// (their `run` is null here).
const std::vector<Subcommand>& CompilerCommandDescriptions();

// The description of compiler command `name` with its `run`, for kvjit-compiler.
Subcommand CompilerCommand(absl::string_view name,
                           absl::Status (*run)(const std::vector<std::string>& arguments));

// kvjit-compiler: $KVJIT_COMPILER where set, else the file of that name
// beside this program; an error says where it looked.
absl::StatusOr<std::string> CompilerPath();

// Replaces this process with `kvjit-compiler ARGUMENTS…`; returns only on
// failure, with the reason.
absl::Status ExecCompiler(const std::vector<std::string>& arguments);

// Runs `kvjit-compiler ARGUMENTS…` as a child sharing stdout and stderr and
// waits for it; an error when it cannot start or does not succeed.
absl::Status RunCompiler(const std::vector<std::string>& arguments);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_COMPILERCOMMANDS_H_
