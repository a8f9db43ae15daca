#include "tools/kvjit/Subcommand.h"

namespace kvjit::cli {

Subcommand InspectCommand();
Subcommand TokenizeCommand();
Subcommand ImportCommand();
Subcommand ReferenceCommand();
Subcommand CompileCommand();
Subcommand VerifyCommand();

// kvjit-compiler's commands, which `kvjit` hands over to it.
const std::vector<Subcommand>& AllSubcommands() {
  static const std::vector<Subcommand> commands = {InspectCommand(), TokenizeCommand(),
                                                     ImportCommand(), ReferenceCommand(),
                                                     CompileCommand(), VerifyCommand()};
  return commands;
}

}  // namespace kvjit::cli
