#ifndef KVJIT_TOOLS_KVJIT_SUBCOMMAND_H_
#define KVJIT_TOOLS_KVJIT_SUBCOMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kvjit::cli {

// One `kvjit NAME ...` command. Its flags are ABSL_FLAGs defined in
// `source_file`, which `kvjit NAME --help` lists.
struct Subcommand {
  const char* name;
  const char* summary;
  const char* usage;  // positional arguments, e.g. "MODEL TEXT"
  const char* source_file;
  // Runs with the positional arguments after absl has parsed the flags.
  absl::Status (*run)(const std::vector<std::string>& arguments);
};

// Every subcommand of this build, in the order `kvjit --help` lists them.
const std::vector<Subcommand>& AllSubcommands();

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_SUBCOMMAND_H_
