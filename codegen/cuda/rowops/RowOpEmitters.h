#ifndef KVJIT_CODEGEN_CUDA_ROWOPS_ROWOPEMITTERS_H_
#define KVJIT_CODEGEN_CUDA_ROWOPS_ROWOPEMITTERS_H_

#include "absl/status/status.h"
#include "codegen/cuda/CudaRowKernelEmitter.h"

// The CUDA kernels of the row-wise opcodes (runtime/ops/RowOps.h), one file
// each beside this header, as runtime/ops has one file each for their
// runtime descriptions. CudaCodegen.cpp's emitter table, which must cover
// every opcode, names them.
namespace kvjit::codegen::cuda {

using RowOpEmitter = absl::Status (*)(CudaRowKernelEmitter& emitter);

absl::Status EmitRmsNorm(CudaRowKernelEmitter& emitter);
absl::Status EmitAddRmsNorm(CudaRowKernelEmitter& emitter);
absl::Status EmitSwiGlu(CudaRowKernelEmitter& emitter);
absl::Status EmitRope(CudaRowKernelEmitter& emitter);

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_ROWOPS_ROWOPEMITTERS_H_
