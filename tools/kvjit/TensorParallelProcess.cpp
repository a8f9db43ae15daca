#include "tools/kvjit/TensorParallelProcess.h"

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/dist/CollectiveTimeout.h"
#include "runtime/dist/MpiCommunicator.h"
#include "runtime/dist/MpiEnvironment.h"
#include "runtime/dist/TensorParallelJob.h"
#include "runtime/generation/RunnerFactory.h"

namespace kvjit::cli {

int RunAsMpiRank(const char* command_name, const std::function<absl::Status()>& command) {
  auto fail = [command_name](const absl::Status& status) {
    std::fprintf(stderr, "kvjit %s: %s\n", command_name, std::string(status.message()).c_str());
    return 1;
  };
  absl::StatusOr<std::unique_ptr<runtime::dist::MpiEnvironment>> environment =
      runtime::dist::MpiEnvironment::Initialize();
  if (!environment.ok()) return fail(environment.status());
  absl::StatusOr<absl::Duration> timeout = runtime::dist::CollectiveTimeoutFromEnvironment();
  if (!timeout.ok()) return fail(timeout.status());
  absl::StatusOr<std::unique_ptr<runtime::dist::MpiCommunicator>> communicator =
      runtime::dist::MpiCommunicator::Create(**environment, *timeout);
  if (!communicator.ok()) return fail(communicator.status());
  runtime::dist::MpiCommunicator& mpi = **communicator;
  if (mpi.rank() != 0) {
    const absl::Status followed = runtime::dist::RunWorkerJob(
        mpi,
        [&mpi](const runtime::dist::RankSetup& setup) {
          return runtime::CreateRankStepRunner(setup, mpi);
        },
        [&mpi](const std::string& message) { mpi.Abort(message); });
    if (!followed.ok()) {
      mpi.Abort(absl::StrCat("kvjit ", command_name, ": ", followed.message()));
    }
    communicator->reset();
    return 0;
  }
  runtime::dist::TensorParallelJob job(mpi, [&mpi](const std::string& message) { mpi.Abort(message); });
  runtime::SetTensorParallelJob(&job);
  const absl::Status status = command();
  runtime::SetTensorParallelJob(nullptr);
  if (!status.ok()) {
    // The other ranks may be waiting in a step rank 0 left: end them all.
    mpi.Abort(absl::StrCat("kvjit ", command_name, ": ", status.message()));
  }
  const absl::Status finished = job.Finish();
  if (!finished.ok()) mpi.Abort(absl::StrCat("kvjit ", command_name, ": ", finished.message()));
  communicator->reset();
  return 0;
}

}  // namespace kvjit::cli
