#include "codegen/lowering/TfmOpParams.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace kvjit::codegen {

absl::Status EmitRowKernel(mlir::Operation* at, RowKernelOpInterface op, bool after_residual_add,
                           const std::vector<mlir::Value>& inputs, InstructionEmitter& emitter) {
  std::optional<kvx::OpCode> opcode = op.getKernelOpcode(after_residual_add);
  if (!opcode) {
    return absl::UnimplementedError(
        absl::StrCat(DescribeOp(op), " has no kernel that adds its residual first"));
  }
  return emitter.Emit(at, *opcode, inputs, inputs.front(), op.buildKernelParams(emitter.builder()));
}

InstructionParams ElementwiseChainParams(const std::vector<kvx::ElementwiseStep>& steps,
                                         flatbuffers::FlatBufferBuilder& builder) {
  return {kvx::OpParams::ElementwiseParams,
          kvx::CreateElementwiseParamsDirect(builder, &steps).Union()};
}

}  // namespace kvjit::codegen
