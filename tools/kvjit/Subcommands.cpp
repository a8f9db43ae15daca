#include "tools/kvjit/Subcommand.h"

namespace kvjit::cli {

const std::vector<Subcommand>& AllSubcommands() {
  static const std::vector<Subcommand> commands = {};
  return commands;
}

}  // namespace kvjit::cli
