#include "tools/kvjit/MpirunLaunch.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/StatusMacros.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "tools/kvjit/SharedFlags.h"

namespace kvjit::cli {

std::vector<std::string> MpirunCommand(const std::string& self, const std::vector<std::string>& command,
                                       const std::string& model_argument,
                                       const std::string& executable, int ranks, int cores,
                                       const std::string& threads_flag, bool threads_given,
                                       bool as_root) {
  std::vector<std::string> line = {"mpirun", "-np", absl::StrCat(ranks), "--oversubscribe",
                                   "--bind-to", "none"};
  if (as_root) line.push_back("--allow-run-as-root");
  line.push_back(self);
  bool replaced = false;
  for (const std::string& argument : command) {
    if (!replaced && argument == model_argument) {
      line.push_back(executable);
      replaced = true;
    } else {
      line.push_back(argument);
    }
  }
  if (!threads_given) {
    line.push_back(absl::StrCat("--", threads_flag, "=", std::max(1, cores / ranks)));
  }
  return line;
}

absl::Status LaunchUnderMpirun(int argc, char** argv, const std::string& model_argument,
                               const std::string& threads_flag) {
  codegen::CompileOptions options = CompileOptionsFromFlags();
  KVJIT_ASSIGN_OR_RETURN(const std::string executable, ExecutablePathFor(model_argument, options));
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0) {
    return absl::InternalError(absl::StrCat("cannot find this program's path to start it under "
                                            "mpirun: ", std::strerror(errno)));
  }
  self[length] = '\0';
  const absl::CommandLineFlag* threads = absl::FindCommandLineFlag(threads_flag);
  const bool threads_given = threads != nullptr && threads->CurrentValue() != threads->DefaultValue();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<std::string> line =
      MpirunCommand(self, std::vector<std::string>(argv + 1, argv + argc), model_argument,
                    executable, static_cast<int>(options.tensor_parallel), cores, threads_flag,
                    threads_given, geteuid() == 0);
  std::fprintf(stderr, "kvjit: %s\n", absl::StrJoin(line, " ").c_str());
  std::fflush(stderr);
  std::vector<char*> exec_argv;
  for (const std::string& argument : line) exec_argv.push_back(const_cast<char*>(argument.c_str()));
  exec_argv.push_back(nullptr);
  execvp(exec_argv[0], exec_argv.data());
  return absl::FailedPreconditionError(absl::StrCat(
      "--tp ", options.tensor_parallel, " starts ", options.tensor_parallel,
      " processes with mpirun, which could not be run (", std::strerror(errno),
      "): install Open MPI (Debian: openmpi-bin; scripts/setup.sh installs it), or start the "
      "ranks yourself: mpirun -np ", options.tensor_parallel, " kvjit ... MODEL.kvx"));
}

}  // namespace kvjit::cli
