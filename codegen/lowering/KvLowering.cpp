// The lowering of each kv op: the cache's instructions, over the step
// function's cache argument.

#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "codegen/lowering/OperandTable.h"
#include "ir/Kv/KvDialect.h"
#include "ir/Kv/KvOps.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::codegen {
namespace {

using WriteOperand = OperandOf<kv::WriteOp, kvx::KvWriteOperand>;
constexpr WriteOperand kWriteOperands[] = {
    {kvx::KvWriteOperand::Key, [](kv::WriteOp op) -> mlir::Value { return op.getKey(); }},
    {kvx::KvWriteOperand::Value, [](kv::WriteOp op) -> mlir::Value { return op.getValue(); }},
    {kvx::KvWriteOperand::SlotMapping,
     [](kv::WriteOp op) -> mlir::Value { return op.getSlotMapping(); }},
};
static_assert(kvx::CoversEnumInOrder(kWriteOperands, &WriteOperand::operand),
              "one value per kvx::KvWriteOperand, in its order");

using AttentionOperand = OperandOf<kv::AttentionOp, kvx::KvAttentionOperand>;
constexpr AttentionOperand kAttentionOperands[] = {
    {kvx::KvAttentionOperand::Query,
     [](kv::AttentionOp op) -> mlir::Value { return op.getQuery(); }},
    {kvx::KvAttentionOperand::Positions,
     [](kv::AttentionOp op) -> mlir::Value { return op.getPositions(); }},
    {kvx::KvAttentionOperand::SeqStarts,
     [](kv::AttentionOp op) -> mlir::Value { return op.getSeqStarts(); }},
    {kvx::KvAttentionOperand::ContextLens,
     [](kv::AttentionOp op) -> mlir::Value { return op.getContextLens(); }},
    {kvx::KvAttentionOperand::BlockTables,
     [](kv::AttentionOp op) -> mlir::Value { return op.getBlockTables(); }},
};
static_assert(kvx::CoversEnumInOrder(kAttentionOperands, &AttentionOperand::operand),
              "one value per kvx::KvAttentionOperand, in its order");

absl::Status Lower(kv::WriteOp write, InstructionEmitter& emitter) {
  KVJIT_RETURN_IF_ERROR(emitter.CheckCache(write, write.getCache()));
  const InstructionParams params = {
      kvx::OpParams::KvWriteParams,
      kvx::CreateKvWriteParams(emitter.builder(), static_cast<uint32_t>(write.getLayer()))
          .Union()};
  return emitter.Emit(write, kvx::OpCode::KvWrite, InputsOf(write, kWriteOperands),
                      write.getKey(), params);
}

absl::Status Lower(kv::AttentionOp attention, InstructionEmitter& emitter) {
  KVJIT_RETURN_IF_ERROR(emitter.CheckCache(attention, attention.getCache()));
  const mlir::IntegerAttr window = attention.getWindowAttr();
  const InstructionParams params = {
      kvx::OpParams::KvAttentionParams,
      kvx::CreateKvAttentionParams(emitter.builder(), static_cast<uint32_t>(attention.getLayer()),
                                   ToF32(attention.getScale()),
                                   window ? static_cast<uint32_t>(window.getInt()) : 0,
                                   attention.getSoftcapAttr()
                                       ? ToF32(attention.getSoftcapAttr().getValue())
                                       : 0.0f)
          .Union()};
  return emitter.Emit(attention, kvx::OpCode::KvAttention,
                      InputsOf(attention, kAttentionOperands), attention.getQuery(), params);
}

template <typename OpT>
struct KvLoweringModel
    : ExecutableLowerableOpInterface::ExternalModel<KvLoweringModel<OpT>, OpT> {
  absl::Status lowerToExecutable(mlir::Operation* op, InstructionEmitter& emitter) const {
    return Lower(mlir::cast<OpT>(op), emitter);
  }
};

}  // namespace

void RegisterKvLoweringModels(mlir::DialectRegistry& registry) {
  registry.addExtension(+[](mlir::MLIRContext* context, kv::KvDialect*) {
    kv::WriteOp::attachInterface<KvLoweringModel<kv::WriteOp>>(*context);
    kv::AttentionOp::attachInterface<KvLoweringModel<kv::AttentionOp>>(*context);
  });
}

}  // namespace kvjit::codegen
