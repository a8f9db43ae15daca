#include "tools/kvjit/Subcommand.h"

namespace kvjit::cli {

Subcommand InspectCommand();
Subcommand ImportCommand();
Subcommand TokenizeCommand();
Subcommand ReferenceCommand();

const std::vector<Subcommand>& AllSubcommands() {
  static const std::vector<Subcommand> commands = {InspectCommand(), TokenizeCommand(),
                                                     ImportCommand(), ReferenceCommand()};
  return commands;
}

}  // namespace kvjit::cli
