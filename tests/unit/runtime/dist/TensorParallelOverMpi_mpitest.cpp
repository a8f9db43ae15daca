// The tensor-parallel step protocol between processes: ctest runs this
// program under `mpirun -np 2` (CMakeLists.txt beside it). Rank 0 drives a
// TensorParallelStepRunner, every other rank runs RunRankWorker, and each
// rank's fake runner sums its share of the logits with the others' through
// the MPI communicator inside the step, as a rank's program does. Every rank
// checks what it saw, prints each check that fails with its rank, and exits
// non-zero if any did.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/dist/CollectiveTimeout.h"
#include "runtime/dist/MpiCommunicator.h"
#include "runtime/dist/MpiEnvironment.h"
#include "runtime/dist/RankWorker.h"
#include "runtime/dist/TensorParallelRunner.h"
#include "tests/unit/runtime/dist/PrefillStep.h"

namespace kvjit::runtime::dist {
namespace {

constexpr int64_t kVocab = 8;

// Each logit is (rank + 1) × (the logits row's token + its column), summed
// over the ranks: rank 0 gets the sum only if every rank ran the step.
class SummingRunner final : public StepRunner {
 public:
  SummingRunner(Communicator& communicator, std::vector<std::string>& log)
      : communicator_(communicator), log_(log) {}

  int64_t num_blocks() const override { return 8; }
  int64_t vocab_size() const override { return kVocab; }
  int64_t max_tokens_per_step() const override { return 16; }
  int64_t block_size() const override { return 4; }

  absl::Status CopyBlock(int64_t source, int64_t destination) override {
    log_.push_back(absl::StrCat("copy ", source, "->", destination));
    return absl::OkStatus();
  }
  absl::StatusOr<absl::Span<const float>> Run(const StepInputs& inputs) override {
    log_.push_back(absl::StrCat("run tokens=", absl::StrJoin(inputs.tokens(), ",")));
    logits_.clear();
    for (int32_t row : inputs.logits_rows()) {
      for (int64_t column = 0; column < kVocab; ++column) {
        logits_.push_back(
            static_cast<float>((communicator_.rank() + 1) * (inputs.tokens()[row] + column)));
      }
    }
    absl::Status summed = communicator_.AllReduceSum(absl::MakeSpan(logits_));
    if (!summed.ok()) return summed;
    return absl::MakeConstSpan(logits_);
  }

 private:
  Communicator& communicator_;
  std::vector<std::string>& log_;
  std::vector<float> logits_;
};

// Rank 0's script: two steps around a block copy. Returns the failures.
int DriveWorkers(Communicator& communicator, const RankSetup& setup,
                 const RankRunnerFactory& factory) {
  int failures = 0;
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "rank 0: FAILED: %s\n", what.c_str());
    ++failures;
  };
  auto runner = TensorParallelStepRunner::Start(communicator, setup, factory);
  if (!runner.ok()) {
    fail(absl::StrCat("Start: ", runner.status().ToString()));
    return failures;
  }
  const int64_t rank_weights = int64_t{communicator.size()} * (communicator.size() + 1) / 2;
  auto logits = (*runner)->Run(Prefill({1, 2, 3}));
  if (!logits.ok()) {
    fail(absl::StrCat("the first step: ", logits.status().ToString()));
  } else {
    std::vector<float> expected;
    for (int64_t column = 0; column < kVocab; ++column) {
      expected.push_back(static_cast<float>(rank_weights * (3 + column)));
    }
    if (std::vector<float>(logits->begin(), logits->end()) != expected) {
      fail(absl::StrCat("the first step's logits are ", absl::StrJoin(*logits, ", "), ", expected ",
                        absl::StrJoin(expected, ", ")));
    }
  }
  absl::Status copied = (*runner)->CopyBlock(0, 2);
  if (!copied.ok()) fail(absl::StrCat("CopyBlock: ", copied.ToString()));
  auto second = (*runner)->Run(Prefill({5}));
  if (!second.ok()) fail(absl::StrCat("the second step: ", second.status().ToString()));
  absl::Status stopped = (*runner)->Stop();
  if (!stopped.ok()) fail(absl::StrCat("Stop: ", stopped.ToString()));
  return failures;
}

int RunChecks() {
  auto environment = MpiEnvironment::Initialize();
  if (!environment.ok()) {
    std::fprintf(stderr, "FAILED: %s\n", environment.status().ToString().c_str());
    return 1;
  }
  auto timeout = CollectiveTimeoutFromEnvironment();
  if (!timeout.ok()) {
    std::fprintf(stderr, "FAILED: %s\n", timeout.status().ToString().c_str());
    return 1;
  }
  auto communicator = MpiCommunicator::Create(**environment, *timeout);
  if (!communicator.ok()) {
    std::fprintf(stderr, "FAILED: %s\n", communicator.status().ToString().c_str());
    return 1;
  }
  MpiCommunicator& mpi = **communicator;
  const RankSetup sent{"/models/tp.kvx", 8, 2, "cpu"};
  std::vector<std::string> log;
  RankSetup received;
  RankRunnerFactory factory =
      [&](const RankSetup& setup) -> absl::StatusOr<std::unique_ptr<StepRunner>> {
    received = setup;
    return std::make_unique<SummingRunner>(mpi, log);
  };
  int failures = 0;
  if (mpi.rank() == 0) {
    failures += DriveWorkers(mpi, sent, factory);
  } else {
    absl::Status worked =
        RunRankWorker(mpi, factory, [&](const std::string& message) { mpi.Abort(message); });
    if (!worked.ok()) {
      std::fprintf(stderr, "rank %d: FAILED: RunRankWorker: %s\n", mpi.rank(),
                   worked.ToString().c_str());
      ++failures;
    }
  }
  const std::vector<std::string> expected = {"run tokens=1,2,3", "copy 0->2", "run tokens=5"};
  if (log != expected || !(received == sent)) {
    std::fprintf(stderr, "rank %d: FAILED: saw the setup for %s and [%s], expected [%s]\n",
                 mpi.rank(), received.executable_path.c_str(), absl::StrJoin(log, "; ").c_str(),
                 absl::StrJoin(expected, "; ").c_str());
    ++failures;
  }
  std::printf("rank %d: %s\n", mpi.rank(), failures == 0 ? "all checks passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kvjit::runtime::dist

int main() { return kvjit::runtime::dist::RunChecks(); }
