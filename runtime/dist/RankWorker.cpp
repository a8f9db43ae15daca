#include "runtime/dist/RankWorker.h"

#include <memory>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/dist/SetupAgreement.h"
#include "runtime/dist/StepCommand.h"

namespace kvjit::runtime::dist {
namespace {

absl::StatusOr<StepCommand> ReceiveCommand(Communicator& communicator) {
  std::vector<uint8_t> bytes;
  KVJIT_RETURN_IF_ERROR(BroadcastBytes(communicator, bytes, /*root=*/0, /*wait_forever=*/true));
  return DecodeStepCommand(bytes);
}

absl::StatusOr<std::unique_ptr<StepRunner>> SetUp(const absl::StatusOr<StepCommand>& command,
                                                  const RankRunnerFactory& create_runner) {
  if (!command.ok()) return command.status();
  const auto* setup = std::get_if<RankSetup>(&*command);
  if (setup == nullptr) {
    return absl::InvalidArgumentError(
        "rank 0's first command is not the setup: rank 0 and this rank are out of step");
  }
  return create_runner(*setup);
}

// Runs the commands after the setup until Stop.
absl::Status FollowRankZero(Communicator& communicator, StepRunner& runner) {
  for (int64_t command_number = 1;; ++command_number) {
    KVJIT_ASSIGN_OR_RETURN(StepCommand command, ReceiveCommand(communicator));
    if (const auto* inputs = std::get_if<StepInputs>(&command)) {
      absl::StatusOr<absl::Span<const float>> logits = runner.Run(*inputs);
      if (!logits.ok()) {
        return absl::Status(logits.status().code(),
                            absl::StrCat("its step (command ", command_number,
                                         ") failed: ", logits.status().message()));
      }
    } else if (const auto* copy = std::get_if<CopyBlockCommand>(&command)) {
      absl::Status copied = runner.CopyBlock(copy->source, copy->destination);
      if (!copied.ok()) {
        return absl::Status(
            copied.code(),
            absl::StrCat("its copy of KV block ", copy->source, " into ", copy->destination,
                         " (command ", command_number, ") failed: ", copied.message()));
      }
    } else if (std::holds_alternative<StopCommand>(command)) {
      return absl::OkStatus();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "command ", command_number, " is a second setup: rank 0 and this rank are out of step"));
    }
  }
}

}  // namespace

absl::Status RunRankWorker(Communicator& communicator, const RankRunnerFactory& create_runner,
                           const AbortJob& abort_job) {
  // Whatever arrives first, rank 0 waits to hear whether this rank is ready.
  absl::StatusOr<std::unique_ptr<StepRunner>> runner =
      SetUp(ReceiveCommand(communicator), create_runner);
  KVJIT_RETURN_IF_ERROR(AgreeOnSetup(communicator, runner.status()));
  absl::Status followed = FollowRankZero(communicator, **runner);
  if (followed.ok()) return followed;
  const std::string message = absl::StrCat("tensor-parallel rank ", communicator.rank(), " of ",
                                           communicator.size(), ": ", followed.message());
  abort_job(message);
  return absl::Status(followed.code(), message);
}

}  // namespace kvjit::runtime::dist
