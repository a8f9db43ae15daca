#include "runtime/dist/TensorParallelJob.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::runtime::dist {
namespace {

// What rank 0 sends before each runner, and at the end of the job.
enum class JobMessage : uint8_t { kEnd = 0, kRunnerFollows = 1 };

absl::Status Send(Communicator& communicator, JobMessage message) {
  uint8_t byte = static_cast<uint8_t>(message);
  return communicator.Broadcast(absl::MakeSpan(&byte, 1), /*root=*/0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorParallelStepRunner>> TensorParallelJob::StartRunner(
    const RankSetup& setup, const RankRunnerFactory& create_runner) {
  KVJIT_RETURN_IF_ERROR(Send(communicator_, JobMessage::kRunnerFollows));
  return TensorParallelStepRunner::Start(communicator_, setup, create_runner, abort_job_);
}

absl::Status TensorParallelJob::Finish() { return Send(communicator_, JobMessage::kEnd); }

absl::Status RunWorkerJob(Communicator& communicator, const RankRunnerFactory& create_runner,
                          const AbortJob& abort_job) {
  while (true) {
    uint8_t byte = 0;
    // Rank 0 may take any time to load, compile or wait for requests.
    KVJIT_RETURN_IF_ERROR(
        communicator.Broadcast(absl::MakeSpan(&byte, 1), /*root=*/0, /*wait_forever=*/true));
    switch (static_cast<JobMessage>(byte)) {
      case JobMessage::kEnd:
        return absl::OkStatus();
      case JobMessage::kRunnerFollows:
        KVJIT_RETURN_IF_ERROR(RunRankWorker(communicator, create_runner, abort_job));
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "rank 0 sent job message ", static_cast<int>(byte),
            ", which this rank does not know: do the ranks run one kvjit build?"));
    }
  }
}

}  // namespace kvjit::runtime::dist
