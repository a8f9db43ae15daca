// The lowering of the dist dialect's collectives into the executable's
// AllReduce and AllGather instructions.

#include <vector>

#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "codegen/lowering/OperandTable.h"
#include "ir/Dist/DistDialect.h"
#include "ir/Dist/DistOps.h"

namespace kvjit::codegen {
namespace {

using AllReduceOperand = OperandOf<dist::AllReduceOp, kvx::AllReduceOperand>;
constexpr AllReduceOperand kAllReduceOperands[] = {
    {kvx::AllReduceOperand::X, [](dist::AllReduceOp op) -> mlir::Value { return op.getInput(); }},
};
static_assert(kvx::CoversEnumInOrder(kAllReduceOperands, &AllReduceOperand::operand),
              "one value per kvx::AllReduceOperand, in its order");

absl::Status Lower(dist::AllReduceOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::AllReduce, InputsOf(op, kAllReduceOperands), op.getInput());
}

using AllGatherOperand = OperandOf<dist::AllGatherOp, kvx::AllGatherOperand>;
constexpr AllGatherOperand kAllGatherOperands[] = {
    {kvx::AllGatherOperand::X, [](dist::AllGatherOp op) -> mlir::Value { return op.getInput(); }},
};
static_assert(kvx::CoversEnumInOrder(kAllGatherOperands, &AllGatherOperand::operand),
              "one value per kvx::AllGatherOperand, in its order");

absl::Status Lower(dist::AllGatherOp op, InstructionEmitter& emitter) {
  flatbuffers::FlatBufferBuilder& builder = emitter.builder();
  const std::vector<int64_t> columns(op.getRankColumns().begin(), op.getRankColumns().end());
  const InstructionParams params{
      kvx::OpParams::AllGatherParams,
      kvx::CreateAllGatherParams(builder, builder.CreateVector(columns)).Union()};
  return emitter.Emit(op, kvx::OpCode::AllGather, InputsOf(op, kAllGatherOperands), op.getInput(),
                      params);
}

template <typename OpT>
struct DistLoweringModel
    : ExecutableLowerableOpInterface::ExternalModel<DistLoweringModel<OpT>, OpT> {
  absl::Status lowerToExecutable(mlir::Operation* op, InstructionEmitter& emitter) const {
    return Lower(mlir::cast<OpT>(op), emitter);
  }
};

}  // namespace

void RegisterDistLoweringModels(mlir::DialectRegistry& registry) {
  registry.addExtension(+[](mlir::MLIRContext* context, dist::DistDialect*) {
    dist::AllReduceOp::attachInterface<DistLoweringModel<dist::AllReduceOp>>(*context);
    dist::AllGatherOp::attachInterface<DistLoweringModel<dist::AllGatherOp>>(*context);
  });
}

}  // namespace kvjit::codegen
