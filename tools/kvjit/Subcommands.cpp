#include "tools/kvjit/Subcommand.h"

namespace kvjit::cli {

Subcommand InspectCommand();
Subcommand ImportCommand();
Subcommand TokenizeCommand();
Subcommand ReferenceCommand();
Subcommand CompileCommand();
Subcommand RunCommand();

const std::vector<Subcommand>& AllSubcommands() {
  static const std::vector<Subcommand> commands = {InspectCommand(), TokenizeCommand(),
                                                     ImportCommand(), ReferenceCommand(),
                                                     CompileCommand(), RunCommand()};
  return commands;
}

}  // namespace kvjit::cli
