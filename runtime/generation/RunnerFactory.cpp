#include "runtime/generation/RunnerFactory.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/core/BuildConfig.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/CpuStepRunner.h"

#if KVJIT_HAVE_CUDA
#include "runtime/cuda/CudaStepRunner.h"
#endif

namespace kvjit::runtime {

absl::StatusOr<RunnerDevice> ParseRunnerDevice(absl::string_view text) {
  RunnerDevice device;
  if (text == "cpu") return device;
  device.kind = RunnerDevice::Kind::kCuda;
  if (text == "cuda") return device;
  absl::string_view ordinal = text;
  if (absl::ConsumePrefix(&ordinal, "cuda:") && absl::SimpleAtoi(ordinal, &device.ordinal) &&
      device.ordinal >= 0) {
    return device;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown device '", text, "': use cpu, cuda or cuda:N (N = 0 for the first GPU)"));
}

std::string DefaultDevice(const Executable& executable) {
  return executable.cuda() != nullptr ? "cuda" : "cpu";
}

namespace {

dist::TensorParallelJob* tensor_parallel_job = nullptr;

// A rank's runner with the executable it runs, which the runner reads.
class RankStepRunner final : public StepRunner {
 public:
  RankStepRunner(std::unique_ptr<Executable> executable, std::unique_ptr<CpuStepRunner> runner)
      : executable_(std::move(executable)), runner_(std::move(runner)) {}

  RunnerMemory Memory() const override { return runner_->Memory(); }
  int64_t num_blocks() const override { return runner_->num_blocks(); }
  int64_t vocab_size() const override { return runner_->vocab_size(); }
  int64_t max_tokens_per_step() const override { return runner_->max_tokens_per_step(); }
  int64_t block_size() const override { return runner_->block_size(); }
  int64_t attention_window() const override { return runner_->attention_window(); }
  absl::Status CopyBlock(int64_t source, int64_t destination) override {
    return runner_->CopyBlock(source, destination);
  }
  absl::StatusOr<absl::Span<const float>> Run(const StepInputs& inputs) override {
    return runner_->Run(inputs);
  }

 private:
  std::unique_ptr<Executable> executable_;
  std::unique_ptr<CpuStepRunner> runner_;
};

// Rank 0's runner of a split executable: every rank's, driven from here.
absl::StatusOr<std::unique_ptr<StepRunner>> CreateTensorParallelRunner(
    const Executable& executable, int64_t num_blocks, int threads, absl::string_view device,
    const RunnerDevice& parsed) {
  const int ranks = executable.tensor_parallel_ranks();
  if (tensor_parallel_job == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        executable.path(), " is split over ", ranks, " tensor-parallel ranks: start them with "
        "mpirun -np ", ranks, " kvjit ... ", executable.path(), ", or run the model with --tp ",
        ranks, ", which starts mpirun on this machine"));
  }
  dist::Communicator& communicator = tensor_parallel_job->communicator();
  if (communicator.size() != ranks || executable.tensor_parallel_rank() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        executable.path(), " is split over ", ranks, " ranks, and mpirun started ",
        communicator.size(), ": run it with mpirun -np ", ranks));
  }
  if (parsed.kind != RunnerDevice::Kind::kCpu) {
    return absl::UnimplementedError(absl::StrCat(
        "device '", device, "': tensor-parallel ranks run on the CPU; the CUDA backend does not "
        "run their collectives (NCCL) yet"));
  }
  dist::RankSetup setup;
  setup.executable_path = executable.path();
  setup.num_blocks = num_blocks;
  setup.threads = threads;
  setup.device = std::string(device);
  KVJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<dist::TensorParallelStepRunner> runner,
      tensor_parallel_job->StartRunner(
          setup, [&](const dist::RankSetup& agreed) -> absl::StatusOr<std::unique_ptr<StepRunner>> {
            KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<CpuStepRunner> local,
                                   CpuStepRunner::Create(executable, agreed.num_blocks,
                                                         agreed.threads, &communicator));
            return local;
          }));
  return runner;
}

}  // namespace

void SetTensorParallelJob(dist::TensorParallelJob* job) { tensor_parallel_job = job; }

absl::StatusOr<std::unique_ptr<StepRunner>> CreateRankStepRunner(const dist::RankSetup& setup,
                                                                 dist::Communicator& communicator,
                                                                 LoadOptions load) {
  KVJIT_ASSIGN_OR_RETURN(RunnerDevice parsed, ParseRunnerDevice(setup.device));
  if (parsed.kind != RunnerDevice::Kind::kCpu) {
    return absl::UnimplementedError(absl::StrCat(
        "device '", setup.device, "': tensor-parallel ranks run on the CPU; the CUDA backend "
        "does not run their collectives (NCCL) yet"));
  }
  load.tensor_parallel_rank = communicator.rank();
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<Executable> executable,
                         Executable::Load(setup.executable_path, load));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<CpuStepRunner> runner,
                         CpuStepRunner::Create(*executable, setup.num_blocks, setup.threads,
                                               &communicator));
  return std::make_unique<RankStepRunner>(std::move(executable), std::move(runner));
}

absl::StatusOr<std::unique_ptr<StepRunner>> CreateStepRunner(const Executable& executable,
                                                             int64_t num_blocks, int threads,
                                                             absl::string_view device) {
  KVJIT_ASSIGN_OR_RETURN(RunnerDevice parsed, ParseRunnerDevice(device));
  if (executable.tensor_parallel_ranks() > 1) {
    return CreateTensorParallelRunner(executable, num_blocks, threads, device, parsed);
  }
  if (parsed.kind == RunnerDevice::Kind::kCpu) {
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<CpuStepRunner> runner,
                           CpuStepRunner::Create(executable, num_blocks, threads));
    return runner;
  }
#if KVJIT_HAVE_CUDA
  cuda::CudaRunnerOptions options;
  options.device_ordinal = parsed.ordinal;
  return cuda::CreateCudaStepRunner(executable, num_blocks, options);
#else
  return absl::FailedPreconditionError(absl::StrCat(
      "device '", device,
      "': this kvjit was built without the CUDA backend (no CUDA toolkit at "
      "configure time); run on the CPU (--device cpu), or rebuild with the toolkit installed"));
#endif
}

}  // namespace kvjit::runtime
