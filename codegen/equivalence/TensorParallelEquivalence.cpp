// --verify of an executable split over tensor-parallel ranks: every rank's
// CPU program runs, each in a thread of its own over an in-process group's
// collectives and driven by the step protocol the ranks use under mpirun
// (runtime/dist), and rank 0's logits are compared with the reference.

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codegen/equivalence/EquivalenceChecker.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/dist/InProcessCommunicator.h"
#include "runtime/dist/RankWorker.h"
#include "runtime/dist/TensorParallelRunner.h"
#include "runtime/generation/RunnerFactory.h"

namespace kvjit::codegen {
namespace {

// How long a rank waits for the others at a collective: far more than a step
// of a model small enough to verify takes.
constexpr absl::Duration kCollectiveTimeout = absl::Seconds(120);

}  // namespace

absl::StatusOr<EquivalenceReport> EquivalenceChecker::CheckTensorParallelProgram(
    const std::string& path, const runtime::LoadOptions& load, int ranks, int threads) const {
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::dist::InProcessGroup> group,
                         runtime::dist::InProcessGroup::Create(ranks, kCollectiveTimeout));
  auto factory_of = [&](int rank) {
    return [&, rank](const runtime::dist::RankSetup& setup) {
      return runtime::CreateRankStepRunner(setup, group->communicator(rank), load);
    };
  };
  // A worker that fails ends every rank's collectives, rank 0's among them,
  // which then reports the failure.
  absl::Mutex mutex;
  std::string worker_failure;
  std::vector<std::thread> workers;
  std::vector<absl::Status> worker_status(ranks);
  for (int rank = 1; rank < ranks; ++rank) {
    workers.emplace_back([&, rank] {
      worker_status[rank] = runtime::dist::RunRankWorker(
          group->communicator(rank), factory_of(rank), [&](const std::string& message) {
            absl::MutexLock lock(&mutex);
            if (worker_failure.empty()) worker_failure = message;
            group->Abort(absl::AbortedError(message));
          });
    });
  }
  runtime::dist::RankSetup setup;
  setup.executable_path = path;
  setup.num_blocks = schedule_.num_blocks;
  setup.threads = std::max(1, threads / ranks);
  setup.device = "cpu";
  absl::StatusOr<EquivalenceReport> report = [&]() -> absl::StatusOr<EquivalenceReport> {
    KVJIT_ASSIGN_OR_RETURN(
        std::unique_ptr<runtime::dist::TensorParallelStepRunner> runner,
        runtime::dist::TensorParallelStepRunner::Start(group->communicator(0), setup,
                                                       factory_of(0)));
    absl::StatusOr<EquivalenceReport> checked =
        CheckProgram(*runner, absl::StrCat("the CPU step programs of ", ranks, " ranks"),
                     tolerance_);
    KVJIT_RETURN_IF_ERROR(runner->Stop());
    return checked;
  }();
  // Rank 0 stopped the workers, or failed: then nothing more will come.
  if (!report.ok()) group->Abort(report.status());
  for (std::thread& worker : workers) worker.join();
  if (!report.ok()) {
    absl::MutexLock lock(&mutex);
    if (!worker_failure.empty()) {
      return absl::Status(report.status().code(),
                          absl::StrCat(report.status().message(), " (", worker_failure, ")"));
    }
    return report.status();
  }
  for (int rank = 1; rank < ranks; ++rank) KVJIT_RETURN_IF_ERROR(worker_status[rank]);
  return report;
}

absl::Status CheckExecutableFile(const EquivalenceChecker& verifier, const std::string& path,
                                 const runtime::LoadOptions& load, int threads,
                                 std::FILE* progress) {
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(path, load));
  const int ranks = executable->tensor_parallel_ranks();
  if (ranks == 1) return CheckExecutable(verifier, *executable, threads, progress);
  if (executable->kv_layout().block_size() != verifier.block_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the executable's KV blocks hold ", executable->kv_layout().block_size(),
        " tokens; the verifier was made for ", verifier.block_size()));
  }
  KVJIT_ASSIGN_OR_RETURN(EquivalenceReport report,
                         verifier.CheckTensorParallelProgram(path, load, ranks, threads));
  if (progress != nullptr) std::fputs(FormatReport(report, verifier.tolerance()).c_str(), progress);
  if (!report.passed()) return absl::InternalError(report.failure());
  return absl::OkStatus();
}

}  // namespace kvjit::codegen
