#include "tools/kvjit/CompilerCommands.h"
#include "tools/kvjit/Subcommand.h"

namespace kvjit::cli {

Subcommand RunCommand();
Subcommand ChatCommand();
Subcommand BenchCommand();
Subcommand PerplexityCommand();
Subcommand ServeCommand();
Subcommand BenchServeCommand();
Subcommand TemplateCommand();

// kvjit's own commands, then those it hands over to kvjit-compiler.
const std::vector<Subcommand>& AllSubcommands() {
  static const std::vector<Subcommand> commands = [] {
    std::vector<Subcommand> all = {RunCommand(), ChatCommand(), ServeCommand(), BenchCommand(),
                                   BenchServeCommand(), PerplexityCommand(), TemplateCommand()};
    for (const Subcommand& command : CompilerCommandDescriptions()) all.push_back(command);
    return all;
  }();
  return commands;
}

}  // namespace kvjit::cli
