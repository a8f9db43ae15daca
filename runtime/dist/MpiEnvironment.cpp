#include "runtime/dist/MpiEnvironment.h"

#include <mpi.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/dist/MpiError.h"

namespace kvjit::runtime::dist {

bool MpiEnvironment::LaunchedByMpi() {
  // Open MPI's mpirun, MPICH's Hydra (PMI) and PMIx launchers, in turn.
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(variable) != nullptr) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<MpiEnvironment>> MpiEnvironment::Initialize() {
  int initialized = 0;
  int finalized = 0;
  KVJIT_RETURN_IF_ERROR(MpiStatus(MPI_Initialized(&initialized), "MPI_Initialized"));
  KVJIT_RETURN_IF_ERROR(MpiStatus(MPI_Finalized(&finalized), "MPI_Finalized"));
  if (initialized || finalized) {
    return absl::FailedPreconditionError(
        "MPI was already started in this process: one MpiEnvironment serves the whole process");
  }
  int provided = MPI_THREAD_SINGLE;
  KVJIT_RETURN_IF_ERROR(MpiStatus(
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread"));
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return absl::FailedPreconditionError(absl::StrCat(
        "this MPI library gives thread level ", provided,
        " where kvjit needs MPI_THREAD_SERIALIZED (", MPI_THREAD_SERIALIZED,
        "): the server calls the collectives from a thread other than the one that started MPI"));
  }
  int rank = 0;
  int size = 0;
  // MPI_COMM_WORLD's handler is still MPI_ERRORS_ARE_FATAL here, so these
  // two either succeed or end the process with MPI's message.
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiEnvironment>(new MpiEnvironment(rank, size));
}

MpiEnvironment::~MpiEnvironment() { MPI_Finalize(); }

}  // namespace kvjit::runtime::dist
