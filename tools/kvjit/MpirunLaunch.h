#ifndef KVJIT_TOOLS_KVJIT_MPIRUNLAUNCH_H_
#define KVJIT_TOOLS_KVJIT_MPIRUNLAUNCH_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

// `kvjit run MODEL --tp N` on one machine: the model compiled for N ranks
// (on the fly, as any `kvjit run MODEL` is), then this very command again
// under `mpirun -np N`, with the executable in place of the model, in place
// of this process.
namespace kvjit::cli {

// The mpirun command line that runs `command` (argv[1:], the model's
// argument `model_argument` replaced by `executable`) as `ranks` processes
// on this machine: --oversubscribe (more ranks than cores is the user's
// choice), --bind-to none (each rank's thread pool spreads over the cores),
// --allow-run-as-root where this process is root (Open MPI refuses root
// otherwise), and each rank's threads (the flag `threads_flag`) where the
// command left them to the default: the cores shared out among the ranks.
std::vector<std::string> MpirunCommand(const std::string& self, const std::vector<std::string>& command,
                                       const std::string& model_argument,
                                       const std::string& executable, int ranks, int cores,
                                       const std::string& threads_flag, bool threads_given,
                                       bool as_root);

// Compiles `model_argument` for --tp ranks where it is not an executable
// already and replaces this process with MpirunCommand's; returns only on an
// error, which names what failed (mpirun not installed among them).
absl::Status LaunchUnderMpirun(int argc, char** argv, const std::string& model_argument,
                               const std::string& threads_flag);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_MPIRUNLAUNCH_H_
