#ifndef KVJIT_RUNTIME_DIST_TENSORPARALLELRUNNER_H_
#define KVJIT_RUNTIME_DIST_TENSORPARALLELRUNNER_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/RankRunnerFactory.h"
#include "runtime/dist/StepCommand.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::runtime::dist {

// Rank 0's step runner of a model split over tensor-parallel ranks: the
// engines (scheduler, sampler, server) run on rank 0 alone and drive this
// runner, which sends each step and block copy to the other ranks
// (RankWorker.h) before it runs its own share. Each rank's program performs
// the collectives with the others' inside the step, and rank 0's returns the
// logits. Everything else is rank 0's runner's, which stands for every
// rank's (they have the same pool and vocabulary).
class TensorParallelStepRunner final : public StepRunner {
 public:
  // Rank 0's side of the setup: sends `setup` to the other ranks, makes
  // rank 0's runner with `create_runner`, and waits, without a deadline,
  // until every rank says whether it made its own (AgreeOnSetup). An error
  // on any rank's failure, naming the ranks; on a communicator that is not
  // rank 0's. Once the ranks are out of step (a command failed after it was
  // sent), `on_out_of_step`, where set, ends the job: the other ranks wait
  // in a collective or for a command that will not come.
  static absl::StatusOr<std::unique_ptr<TensorParallelStepRunner>> Start(
      Communicator& communicator, const RankSetup& setup, const RankRunnerFactory& create_runner,
      AbortJob on_out_of_step = nullptr);

  // Stops the workers where Stop has not.
  ~TensorParallelStepRunner() override;

  // Ends the workers' loop; no command may follow.
  absl::Status Stop();

  RunnerMemory Memory() const override { return local_->Memory(); }
  int64_t num_blocks() const override { return local_->num_blocks(); }
  int64_t vocab_size() const override { return local_->vocab_size(); }
  int64_t max_tokens_per_step() const override { return local_->max_tokens_per_step(); }
  int64_t block_size() const override { return local_->block_size(); }
  int64_t attention_window() const override { return local_->attention_window(); }
  double decode_step_cost(int64_t tokens) const override {
    return local_->decode_step_cost(tokens);
  }
  // Profiles rank 0's share of each step.
  absl::Status SetObserver(StepObserver* observer) override {
    return local_->SetObserver(observer);
  }

  // A copy outside the pool is refused here, before any rank sees it.
  absl::Status CopyBlock(int64_t source, int64_t destination) override;
  // A step that ValidateStep refuses is refused here, before any rank sees
  // it; a step that fails once sent leaves the ranks out of step, and every
  // later command is refused.
  absl::StatusOr<absl::Span<const float>> Run(const StepInputs& inputs) override;

 private:
  TensorParallelStepRunner(Communicator& communicator, std::unique_ptr<StepRunner> local,
                           AbortJob on_out_of_step)
      : communicator_(communicator),
        local_(std::move(local)),
        on_out_of_step_(std::move(on_out_of_step)) {}

  // Records the failure that put the ranks out of step, and ends the job.
  void OutOfStep(const absl::Status& failure);

  // OK while commands may still be sent.
  absl::Status CheckUsable() const;
  absl::Status Send(const StepCommand& command);

  Communicator& communicator_;
  std::unique_ptr<StepRunner> local_;
  bool stopped_ = false;
  // The first failure after a command was sent.
  absl::Status out_of_step_;
  AbortJob on_out_of_step_;
};

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_TENSORPARALLELRUNNER_H_
