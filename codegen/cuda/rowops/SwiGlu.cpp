// The CUDA kernel of SwiGlu (runtime/ops/SwiGlu.cpp describes the op): one
// thread per element.

#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/rowops/RowOpEmitters.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::codegen::cuda {

absl::Status EmitSwiGlu(CudaRowKernelEmitter& emitter) {
  using Operand = kvx::SwiGluOperand;
  KVJIT_ASSIGN_OR_RETURN(std::string gate,
                         emitter.ElementLoad(kvx::OperandIndex(Operand::Gate), "i"));
  KVJIT_ASSIGN_OR_RETURN(std::string up, emitter.ElementLoad(kvx::OperandIndex(Operand::Up), "i"));
  emitter.AddElementKernel(
      "swiglu", "SwiGlu: silu(gate) * up.",
      absl::StrCat("  static_cast<float*>(args.buffers[", emitter.OutputBuffer(0), "])[i] = silu(",
                   gate, ") * ", up, ";\n"));
  return absl::OkStatus();
}

}  // namespace kvjit::codegen::cuda
