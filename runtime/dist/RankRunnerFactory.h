#ifndef KVJIT_RUNTIME_DIST_RANKRUNNERFACTORY_H_
#define KVJIT_RUNTIME_DIST_RANKRUNNERFACTORY_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/dist/StepCommand.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::runtime::dist {

// Makes one rank's step runner from rank 0's setup: the kvjit CLI loads the
// setup's executable at this rank (LoadOptions::tensor_parallel_rank) and
// creates a runner that performs its collectives over this rank's
// communicator; the tests make fakes.
using RankRunnerFactory =
    std::function<absl::StatusOr<std::unique_ptr<StepRunner>>(const RankSetup& setup)>;

// Ends every rank of the job with `message` (MpiCommunicator::Abort); the
// tests record it instead.
using AbortJob = std::function<void(const std::string& message)>;

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_RANKRUNNERFACTORY_H_
