// The lowering of each tfm op a planned step function may hold outside a
// fusion. A new elementwise op goes here as a StepOf overload (its
// ElementwiseOpCode and operands) and an entry in RegisterTfmLoweringModels;
// it then lowers alone and inside any elementwise fusion.

#include <vector>

#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "codegen/lowering/TfmOpParams.h"
#include "ir/Tfm/TfmDialect.h"
#include "ir/Tfm/TfmOps.h"

namespace kvjit::codegen {
namespace {

using kvx::ElementwiseOpCode;

absl::Status Lower(tfm::WeightOp op, InstructionEmitter& emitter) {
  return emitter.BindWeight(op);
}

absl::Status Lower(tfm::SliceColumnsOp op, InstructionEmitter& emitter) {
  return emitter.BindColumnView(op);
}

absl::Status Lower(tfm::EmbeddingOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::Embedding, {op.getTable(), op.getTokens()}, op.getTokens());
}

absl::Status Lower(tfm::LinearOp op, InstructionEmitter& emitter) {
  std::vector<mlir::Value> inputs = {op.getInput(), op.getWeight()};
  if (op.getBias()) inputs.push_back(op.getBias());
  return emitter.Emit(op, kvx::OpCode::Linear, inputs, op.getInput());
}

absl::Status Lower(tfm::ReshapeOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::Copy, {op.getInput()}, op.getInput());
}

absl::Status Lower(tfm::GatherRowsOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::GatherRows, {op.getInput(), op.getRows()}, op.getRows());
}

// rms_norm and rope outside a fusion, for a pipeline without
// fuse-elementwise: the instruction of the fusion of their own kind.
absl::Status Lower(tfm::RmsNormOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::RmsNorm, {op.getInput(), op.getWeight()}, op.getInput(),
                      RmsNormParamsOf(op, emitter.builder()));
}

absl::Status Lower(tfm::RopeOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::Rope, {op.getInput(), op.getPositions()}, op.getInput(),
                      RopeParamsOf(op, emitter.builder()));
}

template <typename OpT>
struct TfmLoweringModel
    : ExecutableLowerableOpInterface::ExternalModel<TfmLoweringModel<OpT>, OpT> {
  absl::Status lowerToExecutable(mlir::Operation* op, InstructionEmitter& emitter) const {
    return Lower(mlir::cast<OpT>(op), emitter);
  }
};

// ---- Elementwise ops: one step of an elementwise chain each ----

kvx::ElementwiseStep StepOf(tfm::AddOp, int32_t lhs, int32_t rhs) {
  return {ElementwiseOpCode::Add, lhs, rhs, 0.0f};
}

kvx::ElementwiseStep StepOf(tfm::MulOp, int32_t lhs, int32_t rhs) {
  return {ElementwiseOpCode::Mul, lhs, rhs, 0.0f};
}

kvx::ElementwiseStep StepOf(tfm::ScaleOp op, int32_t lhs, int32_t) {
  return {ElementwiseOpCode::Scale, lhs, lhs, ToF32(op.getFactor())};
}

kvx::ElementwiseStep StepOf(tfm::SiluOp, int32_t lhs, int32_t) {
  return {ElementwiseOpCode::Silu, lhs, lhs, 0.0f};
}

kvx::ElementwiseStep StepOf(tfm::GeluOp op, int32_t lhs, int32_t) {
  return {op.getApproximateTanh() ? ElementwiseOpCode::GeluTanh : ElementwiseOpCode::Gelu, lhs,
          lhs, 0.0f};
}

kvx::ElementwiseStep StepOf(tfm::TanhOp, int32_t lhs, int32_t) {
  return {ElementwiseOpCode::Tanh, lhs, lhs, 0.0f};
}

// An elementwise op is a chain of one step alone (its operands are the
// instruction's inputs 0 and 1), and its step inside a fusion's chain.
template <typename OpT>
struct ElementwiseStepModel
    : ElementwiseStepOpInterface::ExternalModel<ElementwiseStepModel<OpT>, OpT> {
  kvx::ElementwiseStep getElementwiseStep(mlir::Operation* op, int32_t lhs, int32_t rhs) const {
    return StepOf(mlir::cast<OpT>(op), lhs, rhs);
  }
};

template <typename OpT>
struct ElementwiseLoweringModel
    : ExecutableLowerableOpInterface::ExternalModel<ElementwiseLoweringModel<OpT>, OpT> {
  absl::Status lowerToExecutable(mlir::Operation* op, InstructionEmitter& emitter) const {
    const std::vector<mlir::Value> inputs(op->getOperands().begin(), op->getOperands().end());
    const kvx::ElementwiseStep step = StepOf(mlir::cast<OpT>(op), 0, inputs.size() > 1 ? 1 : 0);
    return emitter.Emit(op, kvx::OpCode::Elementwise, inputs, inputs.front(),
                        ElementwiseChainParams({step}, emitter.builder()));
  }
};

template <typename... OpTs>
void Attach(mlir::MLIRContext& context) {
  (OpTs::template attachInterface<TfmLoweringModel<OpTs>>(context), ...);
}

template <typename... OpTs>
void AttachElementwise(mlir::MLIRContext& context) {
  (OpTs::template attachInterface<ElementwiseLoweringModel<OpTs>, ElementwiseStepModel<OpTs>>(
       context),
   ...);
}

}  // namespace

void RegisterTfmLoweringModels(mlir::DialectRegistry& registry) {
  registry.addExtension(+[](mlir::MLIRContext* context, tfm::TfmDialect*) {
    Attach<tfm::WeightOp, tfm::SliceColumnsOp, tfm::EmbeddingOp, tfm::LinearOp, tfm::ReshapeOp,
           tfm::GatherRowsOp, tfm::RmsNormOp, tfm::RopeOp>(*context);
    AttachElementwise<tfm::AddOp, tfm::MulOp, tfm::ScaleOp, tfm::SiluOp, tfm::GeluOp,
                      tfm::TanhOp>(*context);
  });
}

}  // namespace kvjit::codegen
