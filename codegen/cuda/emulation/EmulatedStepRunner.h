#ifndef KVJIT_CODEGEN_CUDA_EMULATION_EMULATEDSTEPRUNNER_H_
#define KVJIT_CODEGEN_CUDA_EMULATION_EMULATEDSTEPRUNNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/cuda/CudaModuleSpec.h"
#include "codegen/cuda/emulation/HostKernels.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::codegen::cuda {

// Which path of each instruction a step runs.
enum class EmulatedPaths {
  // As CudaStepRunner chooses: the decode paths below the module's
  // prefill_min_rows, the prefill paths from it.
  kAsOnAGpu,
  // The prefill paths (GEMM and tiled attention) whatever the step's rows,
  // so that short steps check them too.
  kPrefillOnly,
};

// CudaStepRunner's protocol over host memory: the same validation
// (runtime/exec/StepValidation.h), the same binding of buffers into
// LaunchArgs (runtime/cuda/LaunchBinding.h), a path chosen by rows as the
// CUDA runner chooses it, and the executable's CUDA kernels run by
// HostKernels.
class EmulatedStepRunner final : public runtime::StepRunner {
 public:
  // `module` (usually ModuleSpecOf the executable's own) and `kernels` (built
  // from module.source) must outlive the runner.
  static absl::StatusOr<std::unique_ptr<EmulatedStepRunner>> Create(
      const runtime::Executable& executable, const CudaModuleSpec& module,
      const HostKernels& kernels, int64_t num_blocks, EmulatedPaths paths);

  int64_t num_blocks() const override { return num_blocks_; }
  int64_t vocab_size() const override { return executable_.config().vocab_size(); }
  int64_t max_tokens_per_step() const override { return executable_.program().max_tokens(); }
  int64_t block_size() const override { return executable_.kv_layout().block_size(); }
  int64_t attention_window() const override { return executable_.AttentionWindow(); }
  absl::Status CopyBlock(int64_t source, int64_t destination) override;
  absl::StatusOr<absl::Span<const float>> Run(const runtime::StepInputs& inputs) override;

 private:
  EmulatedStepRunner(const runtime::Executable& executable, const CudaModuleSpec& module,
                     const HostKernels& kernels, int64_t num_blocks, EmulatedPaths paths);

  float* Arena(uint64_t offset) { return arena_.data() + offset / sizeof(float); }

  const runtime::Executable& executable_;
  const CudaModuleSpec& module_;
  const HostKernels& kernels_;
  int64_t num_blocks_;
  EmulatedPaths paths_;
  std::vector<float> arena_;
  std::vector<uint8_t> kv_pool_;
};

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_EMULATION_EMULATEDSTEPRUNNER_H_
