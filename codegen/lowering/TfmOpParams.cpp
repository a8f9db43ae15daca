#include "codegen/lowering/TfmOpParams.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::codegen {

absl::Status EmitRowKernel(mlir::Operation* at, RowKernelOpInterface op, tfm::AddOp residual_add,
                           absl::FunctionRef<absl::StatusOr<mlir::Value>(mlir::Value)> outer,
                           InstructionEmitter& emitter) {
  std::optional<kvx::OpCode> opcode = op.getKernelOpcode(static_cast<bool>(residual_add));
  if (!opcode) {
    return absl::UnimplementedError(
        absl::StrCat(DescribeOp(op), " has no kernel that adds its residual first"));
  }
  std::vector<mlir::Value> inputs;
  for (mlir::Value read : op.getKernelInputs(residual_add)) {
    KVJIT_ASSIGN_OR_RETURN(mlir::Value input, outer(read));
    inputs.push_back(input);
  }
  return emitter.Emit(at, *opcode, inputs, inputs.front(), op.buildKernelParams(emitter.builder()));
}

InstructionParams ElementwiseChainParams(const std::vector<kvx::ElementwiseStep>& steps,
                                         flatbuffers::FlatBufferBuilder& builder) {
  return {kvx::OpParams::ElementwiseParams,
          kvx::CreateElementwiseParamsDirect(builder, &steps).Union()};
}

}  // namespace kvjit::codegen
