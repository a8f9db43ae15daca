#include "runtime/dist/TensorParallelRunner.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/dist/SetupAgreement.h"
#include "runtime/exec/StepValidation.h"

namespace kvjit::runtime::dist {

absl::StatusOr<std::unique_ptr<TensorParallelStepRunner>> TensorParallelStepRunner::Start(
    Communicator& communicator, const RankSetup& setup, const RankRunnerFactory& create_runner,
    AbortJob on_out_of_step) {
  if (communicator.rank() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the tensor-parallel runner runs on rank 0, and this is rank ",
                     communicator.rank(), ": the other ranks run RunRankWorker"));
  }
  std::vector<uint8_t> bytes = EncodeStepCommand(setup);
  KVJIT_RETURN_IF_ERROR(BroadcastBytes(communicator, bytes, /*root=*/0));
  absl::StatusOr<std::unique_ptr<StepRunner>> local = create_runner(setup);
  KVJIT_RETURN_IF_ERROR(AgreeOnSetup(communicator, local.status()));
  return std::unique_ptr<TensorParallelStepRunner>(
      new TensorParallelStepRunner(communicator, *std::move(local), std::move(on_out_of_step)));
}

TensorParallelStepRunner::~TensorParallelStepRunner() {
  // Where Stop cannot reach the workers, they are out of step already and
  // end at their own failure.
  if (!stopped_) (void)Stop();
}

absl::Status TensorParallelStepRunner::CheckUsable() const {
  if (stopped_) {
    return absl::FailedPreconditionError("the tensor-parallel runner was stopped");
  }
  if (!out_of_step_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("an earlier tensor-parallel command failed, and the ranks are out of step: ",
                     out_of_step_.message()));
  }
  return absl::OkStatus();
}

absl::Status TensorParallelStepRunner::Send(const StepCommand& command) {
  std::vector<uint8_t> bytes = EncodeStepCommand(command);
  absl::Status sent = BroadcastBytes(communicator_, bytes, /*root=*/0);
  if (!sent.ok()) OutOfStep(sent);
  return sent;
}

void TensorParallelStepRunner::OutOfStep(const absl::Status& failure) {
  out_of_step_ = failure;
  if (on_out_of_step_) {
    on_out_of_step_(absl::StrCat("tensor-parallel rank 0 of ", communicator_.size(),
                                 ": the ranks are out of step: ", failure.message()));
  }
}

absl::Status TensorParallelStepRunner::Stop() {
  KVJIT_RETURN_IF_ERROR(CheckUsable());
  stopped_ = true;
  return Send(StopCommand{});
}

absl::Status TensorParallelStepRunner::CopyBlock(int64_t source, int64_t destination) {
  KVJIT_RETURN_IF_ERROR(CheckUsable());
  for (int64_t block : {source, destination}) {
    if (block < 0 || block >= num_blocks()) {
      return absl::OutOfRangeError(absl::StrCat("copy of KV block ", source, " into ", destination,
                                                ": block ", block, " is outside the pool's ",
                                                num_blocks(), " blocks"));
    }
  }
  KVJIT_RETURN_IF_ERROR(Send(CopyBlockCommand{source, destination}));
  absl::Status copied = local_->CopyBlock(source, destination);
  if (!copied.ok()) OutOfStep(copied);
  return copied;
}

absl::StatusOr<absl::Span<const float>> TensorParallelStepRunner::Run(const StepInputs& inputs) {
  KVJIT_RETURN_IF_ERROR(CheckUsable());
  StepLimits limits;
  limits.max_tokens = max_tokens_per_step();
  limits.vocab_size = vocab_size();
  limits.num_blocks = num_blocks();
  limits.block_size = block_size();
  KVJIT_RETURN_IF_ERROR(ValidateStep(inputs, limits));
  KVJIT_RETURN_IF_ERROR(Send(inputs));
  absl::StatusOr<absl::Span<const float>> logits = local_->Run(inputs);
  if (!logits.ok()) OutOfStep(logits.status());
  return logits;
}

}  // namespace kvjit::runtime::dist
