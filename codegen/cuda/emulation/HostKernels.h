#ifndef KVJIT_CODEGEN_CUDA_EMULATION_HOSTKERNELS_H_
#define KVJIT_CODEGEN_CUDA_EMULATION_HOSTKERNELS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/cuda/CudaModuleSpec.h"
#include "runtime/exec/Executable.h"
#include "runtime/schema/CudaLaunchAbi.h"

// The generated CUDA kernels run on the CPU: their translation unit compiled
// by the host C++ compiler against SimtEmulator.h (each CUDA thread a fiber,
// real __syncthreads and warp shuffles) into a shared library, loaded into
// this process. What checks a CUDA executable where no GPU is.
namespace kvjit::codegen::cuda {

class HostKernels {
 public:
  // Compiles `source` (a CudaModuleSpec's or a kvx::CudaModule's) with the
  // compiler named by $KVJIT_HOST_CXX, else the one kvjit was built with,
  // else `c++` on PATH. An error carries the compiler's messages.
  static absl::StatusOr<std::unique_ptr<HostKernels>> Build(const std::string& source);
  ~HostKernels();

  HostKernels(const HostKernels&) = delete;
  HostKernels& operator=(const HostKernels&) = delete;

  // The compiler it was built with, for reports.
  const std::string& compiler() const { return compiler_; }

  // Runs kernel `name` over a grid of blocks of `threads` threads; an error
  // names the kernel and what a GPU would have done wrong (a shuffle in a
  // warp with an exited lane, a __syncthreads not every thread reaches, a
  // deadlock).
  absl::Status Launch(const std::string& name, const unsigned grid[3], unsigned threads,
                      const cuda_abi::LaunchArgs& args) const;

 private:
  using Launcher = int (*)(void (*)(cuda_abi::LaunchArgs), const unsigned*, unsigned,
                           const cuda_abi::LaunchArgs*, char*, int);

  HostKernels() = default;

  std::string directory_;
  std::string compiler_;
  void* library_ = nullptr;
  Launcher launch_ = nullptr;
};

// Runs one path of an instruction as CudaStepRunner does (kvx.fbs, CudaPath):
// scratch (poisoned with NaN, as a GPU's holds another instruction's bytes),
// the launches, the GEMM over the f16 operands in scratch (on the host, in
// f32, as cuBLAS computes it) into output 0, and the epilogue. `args` holds
// the instruction's `inputs` and `outputs` buffers (its KV pool too, where it
// has one).
absl::Status RunPathOnHost(const HostKernels& kernels, const CudaModuleSpec& module,
                           const PathSpec& path, int inputs, int outputs, cuda_abi::LaunchArgs args,
                           const runtime::StepSizes& sizes);

// The product of `factors` for a step of `sizes`: each ceil(extent /
// divisor), as kvx.fbs's SizeFactor says; empty is 1.
int64_t SizeExprProduct(const SizeExpr& factors, const runtime::StepSizes& sizes);

// The launches, paths and source an executable carries, as the plain values
// code generation made them.
CudaModuleSpec ModuleSpecOf(const kvx::CudaModule& module);

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_EMULATION_HOSTKERNELS_H_
