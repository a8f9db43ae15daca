#ifndef KVJIT_RUNTIME_ENGINE_RUNNERFACTORY_H_
#define KVJIT_RUNTIME_ENGINE_RUNNERFACTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/exec/Executable.h"
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
absl::StatusOr<std::unique_ptr<StepRunner>> CreateStepRunner(const Executable& executable,
                                                             int64_t num_blocks, int threads,
                                                             absl::string_view device);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_ENGINE_RUNNERFACTORY_H_
