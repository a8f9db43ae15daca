#ifndef KVJIT_CODEGEN_CUDA_CUDACODEGEN_H_
#define KVJIT_CODEGEN_CUDA_CUDACODEGEN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "codegen/cuda/CudaModuleSpec.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::codegen::cuda {

// Rows from which the runtime runs an instruction's prefill path: below, a
// Linear's matrix-vector kernel reads each weight block once for up to 8 rows
// per pass, which beats dequantizing the weight for a GEMM.
inline constexpr uint32_t kDefaultPrefillMinRows = 32;

// The CUDA kernels of a program: for every instruction of `executable` (an
// executable for the CPU, as ExecutableWriter writes it), kernels
// specialised to its shapes, constants, weight formats and KV layout, in one
// translation unit, and the launches of its decode and prefill paths. The
// kernels compute what the CPU runtime computes for the same instruction.
// An instruction the kernels cannot express is an Unimplemented error
// naming it.
absl::StatusOr<CudaModuleSpec> GenerateCudaModule(
    const kvx::Executable& executable, uint32_t prefill_min_rows = kDefaultPrefillMinRows);

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_CUDACODEGEN_H_
