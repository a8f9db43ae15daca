#ifndef KVJIT_TOOLS_KVJIT_SUBCOMMAND_H_
#define KVJIT_TOOLS_KVJIT_SUBCOMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kvjit::cli {

// One `kvjit NAME ...` command. Its flags are the ABSL_FLAGs defined in
// `source_file` and the shared ones (SharedFlags.h) it names in
// `shared_flags`; `kvjit NAME --help` lists both.
struct Subcommand {
  const char* name;
  const char* summary;
  const char* usage;  // positional arguments, e.g. "MODEL TEXT"
  const char* source_file;
  // Runs with the positional arguments after absl has parsed the flags; null
  // for a command this program hands over to kvjit-compiler
  // (CompilerCommands.h).
  absl::Status (*run)(const std::vector<std::string>& arguments);
  std::vector<std::string> shared_flags = {};
};

// Every subcommand of this program, in the order `kvjit --help` lists them.
const std::vector<Subcommand>& AllSubcommands();

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_SUBCOMMAND_H_
