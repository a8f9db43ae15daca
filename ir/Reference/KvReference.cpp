// The reference evaluation of each kv op, over the evaluator's RefKvCache.

#include "ir/Kv/KvDialect.h"
#include "ir/Kv/KvOps.h"
#include "ir/Reference/ReferenceEvaluableOpInterface.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::reference {
namespace {

absl::Status Evaluate(kv::WriteOp op, ReferenceFrame& frame) {
  KVJIT_ASSIGN_OR_RETURN(RefKvCache * cache, frame.Cache(op));
  return cache->Write(op.getLayerAttr().getInt(), frame.Get(op.getKey()),
                      frame.Get(op.getValue()), frame.Get(op.getSlotMapping()));
}

absl::Status Evaluate(kv::AttentionOp op, ReferenceFrame& frame) {
  KVJIT_ASSIGN_OR_RETURN(RefKvCache * cache, frame.Cache(op));
  KVJIT_ASSIGN_OR_RETURN(
      RefTensor attended,
      cache->Attend(op.getLayerAttr().getInt(), frame.Get(op.getQuery()),
                    frame.Get(op.getPositions()), frame.Get(op.getSeqStarts()),
                    frame.Get(op.getContextLens()), frame.Get(op.getBlockTables()),
                    op.getScale().convertToFloat(),
                    op.getWindowAttr() ? op.getWindowAttr().getInt() : 0,
                    op.getSoftcapAttr() ? op.getSoftcapAttr().getValueAsDouble() : 0.0));
  return frame.Bind(op->getResult(0), std::move(attended));
}

template <typename OpT>
struct KvReferenceModel
    : ReferenceEvaluableOpInterface::ExternalModel<KvReferenceModel<OpT>, OpT> {
  absl::Status evaluateReference(mlir::Operation* op, ReferenceFrame& frame) const {
    return Evaluate(mlir::cast<OpT>(op), frame);
  }
};

}  // namespace

void RegisterKvReferenceModels(mlir::DialectRegistry& registry) {
  registry.addExtension(+[](mlir::MLIRContext* context, kv::KvDialect*) {
    kv::WriteOp::attachInterface<KvReferenceModel<kv::WriteOp>>(*context);
    kv::AttentionOp::attachInterface<KvReferenceModel<kv::AttentionOp>>(*context);
  });
}

}  // namespace kvjit::reference
