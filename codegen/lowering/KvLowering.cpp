// The lowering of each kv op: the cache's instructions, over the step
// function's cache argument.

#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "ir/Kv/KvDialect.h"
#include "ir/Kv/KvOps.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::codegen {
namespace {

absl::Status Lower(kv::WriteOp write, InstructionEmitter& emitter) {
  KVJIT_RETURN_IF_ERROR(emitter.CheckCache(write, write.getCache()));
  const InstructionParams params = {
      kvx::OpParams::KvWriteParams,
      kvx::CreateKvWriteParams(emitter.builder(), static_cast<uint32_t>(write.getLayer()))
          .Union()};
  return emitter.Emit(write, kvx::OpCode::KvWrite,
                      {write.getKey(), write.getValue(), write.getSlotMapping()}, write.getKey(),
                      params);
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
                      {attention.getQuery(), attention.getPositions(), attention.getSeqStarts(),
                       attention.getContextLens(), attention.getBlockTables()},
                      attention.getQuery(), params);
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
