#ifndef KVJIT_RUNTIME_ENGINE_RUNNERFACTORY_H_
#define KVJIT_RUNTIME_ENGINE_RUNNERFACTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/exec/Executable.h"
#include "runtime/dist/TensorParallelJob.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::runtime {

// Where a step runner runs, as users write it (PyTorch's and vLLM's
// spelling): "cpu", "cuda" (the first GPU) or "cuda:N".
struct RunnerDevice {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int ordinal = 0;  // the GPU, for kCuda
};

absl::StatusOr<RunnerDevice> ParseRunnerDevice(absl::string_view text);

// "cuda" for an executable that carries CUDA kernels, else "cpu": what
// `kvjit run model.kvx` uses when no device is asked for.
std::string DefaultDevice(const Executable& executable);

// A step runner for `executable` on `device` over a KV pool of `num_blocks`
// blocks; `threads` is for the CPU. Asking for CUDA from a build without the
// CUDA backend, on a machine without a driver or a GPU, or with an
// executable compiled for the CPU alone, is an error that says which and
// what to do instead.
//
// An executable split over tensor-parallel ranks (`kvjit compile --tp N`)
// runs in rank 0 of a job of N processes (SetTensorParallelJob): the runner
// starts every rank's (RankStepRunner below) and drives them
// (dist::TensorParallelStepRunner). Elsewhere it is an error that says how
// to start the ranks.
absl::StatusOr<std::unique_ptr<StepRunner>> CreateStepRunner(const Executable& executable,
                                                             int64_t num_blocks, int threads,
                                                             absl::string_view device);

// The job whose rank 0 this process is, which runners of split executables
// start the other ranks through; null (the default) in a process of its
// own. The job must outlive every runner made while it is set.
void SetTensorParallelJob(dist::TensorParallelJob* job);

// A runner of one rank's program, for `setup` from rank 0: the executable
// at setup.executable_path loaded at `communicator`'s rank (with `load`'s
// other options), held by the runner, and run on the CPU with its
// collectives over `communicator`.
absl::StatusOr<std::unique_ptr<StepRunner>> CreateRankStepRunner(const dist::RankSetup& setup,
                                                                 dist::Communicator& communicator,
                                                                 LoadOptions load = {});

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_ENGINE_RUNNERFACTORY_H_
