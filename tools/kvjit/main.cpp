// kvjit and kvjit-compiler: compile, inspect and run Transformer models
// (CompilerCommands.h says which program runs which command).

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/BuildInfo.h"
#include "absl/flags/flag.h"
#include "runtime/dist/MpiEnvironment.h"
#include "tools/kvjit/CompilerCommands.h"
#include "tools/kvjit/MpirunLaunch.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/TensorParallelProcess.h"
#include "tools/kvjit/Subcommand.h"

namespace kvjit::cli {
namespace {

void PrintTopLevelHelp() {
  std::printf("usage: kvjit [--version] [--help] <command> [<args>] [--flags]\n\ncommands:\n");
  for (const Subcommand& command : AllSubcommands()) {
    std::printf("  %-10s %s\n", command.name, command.summary);
  }
  std::printf("\n`kvjit <command> --help` describes a command and its flags.\n");
}

void PrintSubcommandHelp(const Subcommand& command) {
  std::printf("usage: kvjit %s %s\n\n%s\n", command.name, command.usage, command.summary);
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    const bool shared = std::find(command.shared_flags.begin(), command.shared_flags.end(),
                                  std::string(flag->Name())) != command.shared_flags.end();
    if (shared || absl::EndsWith(flag->Filename(), command.source_file)) flags.push_back(flag);
  }
  if (flags.empty()) return;
  std::sort(flags.begin(), flags.end(),
            [](auto* a, auto* b) { return a->Name() < b->Name(); });
  std::printf("\nflags:\n");
  for (const absl::CommandLineFlag* flag : flags) {
    std::printf("  --%s (default: %s)\n      %s\n", std::string(flag->Name()).c_str(),
                flag->DefaultValue().c_str(), flag->Help().c_str());
  }
}

const Subcommand* FindSubcommand(const std::string& name) {
  for (const Subcommand& command : AllSubcommands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

int Run(int argc, char** argv) {
  if (argc < 2) {
    PrintTopLevelHelp();
    return 2;
  }
  std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    PrintTopLevelHelp();
    return 0;
  }
  if (first == "--version" || first == "version") {
    std::printf("%s\n", DescribeBuild().c_str());
    return 0;
  }
  const Subcommand* command = FindSubcommand(first);
  if (command == nullptr) {
    std::fprintf(stderr, "kvjit: unknown command '%s'\n\n", first.c_str());
    PrintTopLevelHelp();
    return 2;
  }
  if (command->run == nullptr) {
    const absl::Status status = ExecCompiler(std::vector<std::string>(argv + 1, argv + argc));
    std::fprintf(stderr, "kvjit %s: %s\n", command->name, std::string(status.message()).c_str());
    return 1;
  }
  for (int i = 2; i < argc; ++i) {
    std::string argument = argv[i];
    if (argument == "--help" || argument == "-h") {
      PrintSubcommandHelp(*command);
      return 0;
    }
  }
  // absl parses the flags after the subcommand; argv[0] names both for its errors.
  std::string program = absl::StrCat("kvjit ", command->name);
  std::vector<char*> sub_argv = {program.data()};
  for (int i = 2; i < argc; ++i) sub_argv.push_back(argv[i]);
  std::vector<char*> positional_raw =
      absl::ParseCommandLine(static_cast<int>(sub_argv.size()), sub_argv.data());
  std::vector<std::string> positional(positional_raw.begin() + 1, positional_raw.end());
  if (runtime::dist::MpiEnvironment::LaunchedByMpi()) {
    return RunAsMpiRank(command->name, [&] { return command->run(positional); });
  }
  const bool splits = std::find(command->shared_flags.begin(), command->shared_flags.end(),
                                "tp") != command->shared_flags.end();
  if (splits && absl::GetFlag(FLAGS_tp) > 1 && !positional.empty()) {
    const bool own_threads = std::find(command->shared_flags.begin(), command->shared_flags.end(),
                                       "threads") != command->shared_flags.end();
    const absl::Status launched = LaunchUnderMpirun(argc, argv, positional.front(),
                                                    own_threads ? "threads" : "bench_threads");
    std::fprintf(stderr, "kvjit %s: %s\n", command->name, std::string(launched.message()).c_str());
    return 1;
  }
  absl::Status status = command->run(positional);
  if (!status.ok()) {
    std::fprintf(stderr, "kvjit %s: %s\n", command->name, std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace kvjit::cli

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("kvjit <command> [<args>]; `kvjit --help` lists the commands");
  return kvjit::cli::Run(argc, argv);
}
