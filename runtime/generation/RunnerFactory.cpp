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

absl::StatusOr<std::unique_ptr<StepRunner>> CreateStepRunner(const Executable& executable,
                                                             int64_t num_blocks, int threads,
                                                             absl::string_view device) {
  KVJIT_ASSIGN_OR_RETURN(RunnerDevice parsed, ParseRunnerDevice(device));
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
