#ifndef KVJIT_TOOLS_KVJIT_TENSORPARALLELPROCESS_H_
#define KVJIT_TOOLS_KVJIT_TENSORPARALLELPROCESS_H_

#include <functional>

#include "absl/status/status.h"

// A kvjit command in one process of an mpirun job (`mpirun -np N kvjit run
// m.kvx ...`, docs/scale-out.md).
namespace kvjit::cli {

// Starts MPI; rank 0 runs `command` with the job set
// (runtime::SetTensorParallelJob), so that the runners of split executables
// drive the other ranks; those follow rank 0's runners until the job ends.
// A rank that fails ends the whole job (MPI_Abort) after printing why, so
// that no rank waits for it. Returns the process's exit code.
int RunAsMpiRank(const char* command_name, const std::function<absl::Status()>& command);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_TENSORPARALLELPROCESS_H_
