#ifndef KVJIT_RUNTIME_DIST_RANKWORKER_H_
#define KVJIT_RUNTIME_DIST_RANKWORKER_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/RankRunnerFactory.h"

namespace kvjit::runtime::dist {


// What every rank but 0 does for the life of its process, in step with
// rank 0's TensorParallelStepRunner: waits, without a deadline, for rank 0's
// setup, makes its runner with `create_runner` and tells every rank whether
// it could (AgreeOnSetup); then runs each command rank 0 sends, in order: a
// step (whose logits rank 0 alone uses), a block copy, and Stop, which ends
// it with OK.
//
// Once the steps have begun, a failure here (a step, a command that does not
// decode, the communicator) would leave rank 0 waiting in a collective, so
// it calls `abort_job` with a message naming this rank and the error, and
// returns the error should `abort_job` return.
absl::Status RunRankWorker(Communicator& communicator, const RankRunnerFactory& create_runner,
                           const AbortJob& abort_job);

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_RANKWORKER_H_
