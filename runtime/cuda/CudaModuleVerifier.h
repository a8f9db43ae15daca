#ifndef KVJIT_RUNTIME_CUDA_CUDAMODULEVERIFIER_H_
#define KVJIT_RUNTIME_CUDA_CUDAMODULEVERIFIER_H_

#include "absl/status/status.h"
#include "runtime/exec/Executable.h"

namespace kvjit::cuda {

// Checks an executable's CUDA module against its program and this runtime's
// kernel ABI, so that every launch its readers (the CUDA runner, the host
// emulation) make is in bounds: the ABI version, a cubin or PTX, kernel
// names, one CUDA instruction per program instruction, each path's launches
// (kernel index, threads, grid extents at the largest step), GEMM and scratch.
// An executable without a module passes. Messages name the file and the
// instruction.
absl::Status VerifyCudaModule(const runtime::Executable& executable);

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_CUDAMODULEVERIFIER_H_
