#ifndef KVJIT_RUNTIME_CUDA_LAUNCHBINDING_H_
#define KVJIT_RUNTIME_CUDA_LAUNCHBINDING_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/exec/Executable.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/schema/StepContract.h"

// The one binding of an instruction's buffers into the LaunchArgs of its
// kernels (runtime/schema/CudaLaunchAbi.h), for the CUDA runner
// (runtime/cuda/CudaStepRunner.cpp) and the host emulation of the same
// kernels (codegen/cuda/emulation/EmulatedStepRunner.cpp): both launch what
// this binds, in device memory or in host memory.
namespace kvjit::cuda {

// Where a runner keeps what its kernels read and write, as addresses in the
// memory they run in.
struct LaunchMemory {
  uintptr_t arena = 0;
  // By weight index: the weight's bytes exactly as stored in its file.
  std::vector<uintptr_t> weights;
  // By kvx::StepInput.
  std::array<uintptr_t, kvx::kStepInputCount> step_inputs{};
  // Layer 0 of the KV pool; layer l is layer_stride_bytes × l past it.
  uintptr_t kv_pool = 0;
  uint64_t kv_layer_stride_bytes = 0;
};

// An instruction's LaunchArgs with its buffers bound; the runner sets the
// scratch (ScratchBuffer(inputs, outputs)) per path and the step's sizes per
// step (SetStepSizes).
struct BoundInstruction {
  cuda_abi::LaunchArgs args = {};
  int inputs = 0;
  int outputs = 0;
  // Where the instruction's first output starts (where a GEMM writes); 0
  // without outputs.
  uintptr_t first_output = 0;

  int scratch_index() const { return cuda_abi::ScratchBuffer(inputs, outputs); }
};

// Binds `instruction`'s inputs, outputs and KV pool in `memory`; refuses an
// instruction whose buffers do not fit LaunchArgs, or that names a step input
// or a weight `memory` lacks.
absl::StatusOr<BoundInstruction> BindInstruction(const kvx::Instruction& instruction,
                                                 const LaunchMemory& memory);

// The step's sizes, as every kernel of the step reads them.
void SetStepSizes(const runtime::StepSizes& sizes, cuda_abi::LaunchArgs& args);

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_LAUNCHBINDING_H_
