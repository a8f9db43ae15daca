// The lowering of each tfm op a planned step function may hold outside a
// fusion. A new elementwise op goes here as a StepOf overload (its
// ElementwiseOpCode and operands) and an entry in AttachElementwise; a new
// row-wise op as KernelOf, KernelInputsOf and ParamsOf overloads (its
// opcodes, their operand tables and its parameter table) and an entry in
// AttachRowKernels. Either then lowers alone and
// inside its fusions.

#include <cstdint>
#include <optional>
#include <vector>

#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "codegen/lowering/OperandTable.h"
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

using EmbeddingOperand = OperandOf<tfm::EmbeddingOp, kvx::EmbeddingOperand>;
constexpr EmbeddingOperand kEmbeddingOperands[] = {
    {kvx::EmbeddingOperand::Table,
     [](tfm::EmbeddingOp op) -> mlir::Value { return op.getTable(); }},
    {kvx::EmbeddingOperand::Tokens,
     [](tfm::EmbeddingOp op) -> mlir::Value { return op.getTokens(); }},
};
static_assert(kvx::CoversEnumInOrder(kEmbeddingOperands, &EmbeddingOperand::operand),
              "one value per kvx::EmbeddingOperand, in its order");

absl::Status Lower(tfm::EmbeddingOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::Embedding, InputsOf(op, kEmbeddingOperands), op.getTokens());
}

// The bias is null where the model has none, which ends the inputs there.
using LinearOperand = OperandOf<tfm::LinearOp, kvx::LinearOperand>;
constexpr LinearOperand kLinearOperands[] = {
    {kvx::LinearOperand::X, [](tfm::LinearOp op) -> mlir::Value { return op.getInput(); }},
    {kvx::LinearOperand::Weight, [](tfm::LinearOp op) -> mlir::Value { return op.getWeight(); }},
    {kvx::LinearOperand::Bias, [](tfm::LinearOp op) -> mlir::Value { return op.getBias(); }},
};
static_assert(kvx::CoversEnumInOrder(kLinearOperands, &LinearOperand::operand),
              "one value per kvx::LinearOperand, in its order");

absl::Status Lower(tfm::LinearOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::Linear, InputsOf(op, kLinearOperands), op.getInput());
}

using CopyOperand = OperandOf<tfm::ReshapeOp, kvx::CopyOperand>;
constexpr CopyOperand kCopyOperands[] = {
    {kvx::CopyOperand::X, [](tfm::ReshapeOp op) -> mlir::Value { return op.getInput(); }},
};
static_assert(kvx::CoversEnumInOrder(kCopyOperands, &CopyOperand::operand),
              "one value per kvx::CopyOperand, in its order");

absl::Status Lower(tfm::ReshapeOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::Copy, InputsOf(op, kCopyOperands), op.getInput());
}

using GatherRowsOperand = OperandOf<tfm::GatherRowsOp, kvx::GatherRowsOperand>;
constexpr GatherRowsOperand kGatherRowsOperands[] = {
    {kvx::GatherRowsOperand::X, [](tfm::GatherRowsOp op) -> mlir::Value { return op.getInput(); }},
    {kvx::GatherRowsOperand::Rows,
     [](tfm::GatherRowsOp op) -> mlir::Value { return op.getRows(); }},
};
static_assert(kvx::CoversEnumInOrder(kGatherRowsOperands, &GatherRowsOperand::operand),
              "one value per kvx::GatherRowsOperand, in its order");

absl::Status Lower(tfm::GatherRowsOp op, InstructionEmitter& emitter) {
  return emitter.Emit(op, kvx::OpCode::GatherRows, InputsOf(op, kGatherRowsOperands), op.getRows());
}

template <typename OpT>
struct TfmLoweringModel
    : ExecutableLowerableOpInterface::ExternalModel<TfmLoweringModel<OpT>, OpT> {
  absl::Status lowerToExecutable(mlir::Operation* op, InstructionEmitter& emitter) const {
    return Lower(mlir::cast<OpT>(op), emitter);
  }
};

// ---- Row-wise ops: a kernel each, alone or after the residual add they fuse ----

// The opcodes of a row-wise op's kernel: alone, and after its residual add
// where the op is FusesResidualAdd.
struct RowKernel {
  kvx::OpCode alone;
  std::optional<kvx::OpCode> after_residual_add;
};

RowKernel KernelOf(tfm::RmsNormOp) { return {kvx::OpCode::RmsNorm, kvx::OpCode::AddRmsNorm}; }

using RmsNormOperand = OperandOf<tfm::RmsNormOp, kvx::RmsNormOperand>;
constexpr RmsNormOperand kRmsNormOperands[] = {
    {kvx::RmsNormOperand::X, [](tfm::RmsNormOp norm) -> mlir::Value { return norm.getInput(); }},
    {kvx::RmsNormOperand::Weight,
     [](tfm::RmsNormOp norm) -> mlir::Value { return norm.getWeight(); }},
};
static_assert(kvx::CoversEnumInOrder(kRmsNormOperands, &RmsNormOperand::operand),
              "one value per kvx::RmsNormOperand, in its order");

// A norm after the residual add whose sum it normalizes.
struct AddThenNorm {
  tfm::AddOp add;
  tfm::RmsNormOp norm;
};

using AddRmsNormOperand = OperandOf<AddThenNorm, kvx::AddRmsNormOperand>;
constexpr AddRmsNormOperand kAddRmsNormOperands[] = {
    {kvx::AddRmsNormOperand::A,
     [](AddThenNorm fused) -> mlir::Value { return fused.add.getLhs(); }},
    {kvx::AddRmsNormOperand::B,
     [](AddThenNorm fused) -> mlir::Value { return fused.add.getRhs(); }},
    {kvx::AddRmsNormOperand::Weight,
     [](AddThenNorm fused) -> mlir::Value { return fused.norm.getWeight(); }},
};
static_assert(kvx::CoversEnumInOrder(kAddRmsNormOperands, &AddRmsNormOperand::operand),
              "one value per kvx::AddRmsNormOperand, in its order");

std::vector<mlir::Value> KernelInputsOf(tfm::RmsNormOp norm, tfm::AddOp residual_add) {
  if (residual_add) return InputsOf(AddThenNorm{residual_add, norm}, kAddRmsNormOperands);
  return InputsOf(norm, kRmsNormOperands);
}

InstructionParams ParamsOf(tfm::RmsNormOp norm, flatbuffers::FlatBufferBuilder& builder) {
  return {kvx::OpParams::RmsNormParams,
          kvx::CreateRmsNormParams(builder, ToF32(norm.getEpsilon())).Union()};
}

RowKernel KernelOf(tfm::RopeOp) { return {kvx::OpCode::Rope, std::nullopt}; }

using RopeOperand = OperandOf<tfm::RopeOp, kvx::RopeOperand>;
constexpr RopeOperand kRopeOperands[] = {
    {kvx::RopeOperand::X, [](tfm::RopeOp rope) -> mlir::Value { return rope.getInput(); }},
    {kvx::RopeOperand::Positions,
     [](tfm::RopeOp rope) -> mlir::Value { return rope.getPositions(); }},
};
static_assert(kvx::CoversEnumInOrder(kRopeOperands, &RopeOperand::operand),
              "one value per kvx::RopeOperand, in its order");

// Rope fuses no residual add (KernelOf), so it is never given one.
std::vector<mlir::Value> KernelInputsOf(tfm::RopeOp rope, tfm::AddOp) {
  return InputsOf(rope, kRopeOperands);
}

InstructionParams ParamsOf(tfm::RopeOp rope, flatbuffers::FlatBufferBuilder& builder) {
  auto type = mlir::cast<mlir::RankedTensorType>(rope.getInput().getType());
  const int64_t rotary_dim = rope.getRotaryDim() ? static_cast<int64_t>(*rope.getRotaryDim())
                                                 : type.getShape().back();
  flatbuffers::Offset<kvx::RopeScaling> scaling = 0;
  if (tfm::RopeScalingAttr attr = rope.getScalingAttr()) {
    scaling = kvx::CreateRopeScaling(
        builder,
        attr.getKind() == tfm::RopeScalingKind::linear ? kvx::RopeScalingKind::Linear
                                                       : kvx::RopeScalingKind::Llama3,
        ToF32(attr.getFactor()), ToF32(attr.getLowFreqFactor()), ToF32(attr.getHighFreqFactor()),
        static_cast<uint32_t>(attr.getOriginalContext()));
  }
  flatbuffers::Offset<flatbuffers::Vector<float>> freq_factors = 0;
  if (std::optional<llvm::ArrayRef<float>> factors = rope.getFreqFactors()) {
    freq_factors = builder.CreateVector(factors->data(), factors->size());
  }
  const kvx::RopeStyle style =
      rope.getStyle() == tfm::RopeStyle::neox ? kvx::RopeStyle::NeoX : kvx::RopeStyle::Interleaved;
  return {kvx::OpParams::RopeParams,
          kvx::CreateRopeParams(builder, style, ToF32(rope.getTheta()),
                                static_cast<uint32_t>(rotary_dim), scaling, freq_factors)
              .Union()};
}

// A row-wise op's kernel, and the op alone (outside any fusion, for a
// pipeline without fuse-elementwise) as its instruction.
template <typename OpT>
struct RowKernelModel : RowKernelOpInterface::ExternalModel<RowKernelModel<OpT>, OpT> {
  std::optional<kvx::OpCode> getKernelOpcode(mlir::Operation* op, bool after_residual_add) const {
    const RowKernel kernel = KernelOf(mlir::cast<OpT>(op));
    return after_residual_add ? kernel.after_residual_add : kernel.alone;
  }
  std::vector<mlir::Value> getKernelInputs(mlir::Operation* op, tfm::AddOp residual_add) const {
    return KernelInputsOf(mlir::cast<OpT>(op), residual_add);
  }
  InstructionParams buildKernelParams(mlir::Operation* op,
                                      flatbuffers::FlatBufferBuilder& builder) const {
    return ParamsOf(mlir::cast<OpT>(op), builder);
  }
};

template <typename OpT>
struct RowKernelLoweringModel
    : ExecutableLowerableOpInterface::ExternalModel<RowKernelLoweringModel<OpT>, OpT> {
  absl::Status lowerToExecutable(mlir::Operation* op, InstructionEmitter& emitter) const {
    return EmitRowKernel(
        op, mlir::cast<RowKernelOpInterface>(op), /*residual_add=*/tfm::AddOp(),
        [](mlir::Value read) -> absl::StatusOr<mlir::Value> { return read; }, emitter);
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
void AttachRowKernels(mlir::MLIRContext& context) {
  (OpTs::template attachInterface<RowKernelLoweringModel<OpTs>, RowKernelModel<OpTs>>(context),
   ...);
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
           tfm::GatherRowsOp>(*context);
    AttachRowKernels<tfm::RmsNormOp, tfm::RopeOp>(*context);
    AttachElementwise<tfm::AddOp, tfm::MulOp, tfm::ScaleOp, tfm::SiluOp, tfm::GeluOp,
                      tfm::TanhOp>(*context);
  });
}

}  // namespace kvjit::codegen
