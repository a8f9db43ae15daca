#ifndef KVJIT_RUNTIME_DIST_TENSORPARALLELJOB_H_
#define KVJIT_RUNTIME_DIST_TENSORPARALLELJOB_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/RankRunnerFactory.h"
#include "runtime/dist/RankWorker.h"
#include "runtime/dist/TensorParallelRunner.h"

// A kvjit command run by every rank of a tensor-parallel job (`mpirun -np N
// kvjit run|chat|serve|bench m.kvx ...`): rank 0 runs the command, which
// may make one step runner after another (a benchmark's runs), and the other
// ranks follow each runner until rank 0 says the job is over.
namespace kvjit::runtime::dist {

// Rank 0's side.
class TensorParallelJob {
 public:
  // `abort_job` ends every rank when a runner's ranks fall out of step.
  TensorParallelJob(Communicator& communicator, AbortJob abort_job)
      : communicator_(communicator), abort_job_(std::move(abort_job)) {}

  Communicator& communicator() { return communicator_; }

  // Tells the other ranks that a runner follows, then starts it
  // (TensorParallelStepRunner::Start).
  absl::StatusOr<std::unique_ptr<TensorParallelStepRunner>> StartRunner(
      const RankSetup& setup, const RankRunnerFactory& create_runner);

  // Tells the other ranks that no runner follows: their RunWorkerJob returns.
  absl::Status Finish();

 private:
  Communicator& communicator_;
  AbortJob abort_job_;
};

// What every other rank does for the whole job: each runner rank 0 starts,
// followed to its end (RunRankWorker), until rank 0 finishes the job.
absl::Status RunWorkerJob(Communicator& communicator, const RankRunnerFactory& create_runner,
                          const AbortJob& abort_job);

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_TENSORPARALLELJOB_H_
