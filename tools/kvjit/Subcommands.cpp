#include "tools/kvjit/Subcommand.h"

namespace kvjit::cli {

Subcommand InspectCommand();
Subcommand ImportCommand();
Subcommand TokenizeCommand();
Subcommand ReferenceCommand();
Subcommand CompileCommand();
Subcommand RunCommand();
Subcommand BenchCommand();

const std::vector<Subcommand>& AllSubcommands() {
  static const std::vector<Subcommand> commands = {InspectCommand(), TokenizeCommand(),
                                                     ImportCommand(), ReferenceCommand(),
                                                     CompileCommand(), RunCommand(),
                                                     BenchCommand()};
  return commands;
}

}  // namespace kvjit::cli
