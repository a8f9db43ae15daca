#include "runtime/generation/RunnerFactory.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/core/BuildConfig.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/CpuStepRunner.h"

#if KVJIT_HAVE_CUDA
#include <cstdlib>

#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaStepRunner.h"
#include "runtime/dist/NcclCommunicator.h"
#include "runtime/dist/NcclLibrary.h"
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
  RankStepRunner(std::unique_ptr<Executable> executable, std::unique_ptr<StepRunner> runner)
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
  std::unique_ptr<StepRunner> runner_;
};

#if KVJIT_HAVE_CUDA
// This process's rank among those of the job on its machine, from the
// variables MPI launchers set (Open MPI's, then MPICH's and Intel MPI's);
// without them, the job's rank: every rank on this machine.
int LocalRank(const dist::Communicator& host) {
  for (const char* variable : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}) {
    int local_rank = 0;
    const char* value = std::getenv(variable);
    if (value != nullptr && absl::SimpleAtoi(value, &local_rank) && local_rank >= 0) {
      return local_rank;
    }
  }
  return host.rank();
}
#endif

// One rank's runner on `device`: on the CPU with its collectives over
// `host`; on a GPU with them over an NCCL communicator that the ranks join
// over `host`, which the runner owns. Plain "cuda" puts each rank of a
// machine on its own GPU, the one numbered by its local rank, as mpirun's
// one process per GPU expects; "cuda:N" puts the rank on GPU N.
absl::StatusOr<std::unique_ptr<StepRunner>> CreateLocalRankRunner(const Executable& executable,
                                                                  int64_t num_blocks, int threads,
                                                                  absl::string_view device,
                                                                  dist::Communicator& host) {
  KVJIT_ASSIGN_OR_RETURN(RunnerDevice parsed, ParseRunnerDevice(device));
  if (parsed.kind == RunnerDevice::Kind::kCpu) {
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<CpuStepRunner> runner,
                           CpuStepRunner::Create(executable, num_blocks, threads, &host));
    return runner;
  }
#if KVJIT_HAVE_CUDA
  cuda::CudaRunnerOptions options;
  options.device_ordinal = device == "cuda" ? LocalRank(host) : parsed.ordinal;
  KVJIT_ASSIGN_OR_RETURN(options.collective_timeout, dist::CollectiveTimeoutFromEnvironment());
  // Loaded once and kept: every communicator uses it to its end, and the
  // library stays mapped until the process ends anyway (NcclLibrary.h).
  static auto* const library =
      new absl::StatusOr<std::unique_ptr<dist::NcclLibrary>>(dist::NcclLibrary::LoadConfigured());
  KVJIT_RETURN_IF_ERROR(library->status());
  // NCCL binds its communicator to the GPU whose context is current.
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaDevice> gpu,
                         cuda::CudaDevice::Create(options.device_ordinal));
  KVJIT_RETURN_IF_ERROR(gpu->MakeCurrent());
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<dist::NcclCommunicator> communicator,
                         dist::NcclCommunicator::Create(host, ***library, options.device_ordinal));
  return cuda::CreateCudaStepRunner(executable, num_blocks, options, std::move(communicator));
#else
  return absl::FailedPreconditionError(absl::StrCat(
      "device '", device,
      "': this kvjit was built without the CUDA backend (no CUDA toolkit at configure time); run "
      "the ranks on the CPU (--device cpu), or rebuild with the toolkit installed"));
#endif
}

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
  if (parsed.kind == RunnerDevice::Kind::kCuda && executable.cuda() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        executable.path(), " has no CUDA kernels: it was compiled for the CPU; compile the model "
        "with --tp ", ranks, " --target cuda to run its ranks on GPUs"));
  }
  dist::RankSetup setup;
  setup.executable_path = executable.path();
  setup.num_blocks = num_blocks;
  setup.threads = threads;
  setup.device = std::string(device);
  KVJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<dist::TensorParallelStepRunner> runner,
      tensor_parallel_job->StartRunner(
          setup, [&](const dist::RankSetup& agreed) {
            return CreateLocalRankRunner(executable, agreed.num_blocks, agreed.threads,
                                         agreed.device, communicator);
          }));
  return runner;
}

}  // namespace

void SetTensorParallelJob(dist::TensorParallelJob* job) { tensor_parallel_job = job; }

absl::StatusOr<std::unique_ptr<StepRunner>> CreateRankStepRunner(const dist::RankSetup& setup,
                                                                 dist::Communicator& communicator,
                                                                 LoadOptions load) {
  KVJIT_RETURN_IF_ERROR(ParseRunnerDevice(setup.device).status());
  load.tensor_parallel_rank = communicator.rank();
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<Executable> executable,
                         Executable::Load(setup.executable_path, load));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<StepRunner> runner,
                         CreateLocalRankRunner(*executable, setup.num_blocks, setup.threads,
                                               setup.device, communicator));
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
