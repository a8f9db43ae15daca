#include "ir/Kv/KvOps.h"

#include "ir/ShapeChecks.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

namespace kvjit::kv {
namespace {

using ::kvjit::ir::DimsCompatible;
using ::kvjit::ir::TensorTypeOf;
using ::kvjit::ir::VerifySoftcap;

using mlir::LogicalResult;
using mlir::RankedTensorType;
using mlir::ShapedType;

LogicalResult VerifyLayer(mlir::Operation* op, CacheType cache, int64_t layer) {
  if (layer >= 0 && layer < cache.getLayers()) return mlir::success();
  return op->emitOpError() << "layer " << layer << " is outside the cache's " << cache.getLayers()
                           << " layers";
}

// `[tokens, heads, head_dim]` whose head_dim is the cache's.
LogicalResult VerifyHeads(mlir::Operation* op, llvm::StringRef operand, RankedTensorType type,
                          CacheType cache) {
  if (type.getRank() != 3) {
    return op->emitOpError() << operand << " must be [tokens, heads, head_dim], got " << type;
  }
  if (!DimsCompatible(type.getDimSize(2), cache.getHeadDim())) {
    return op->emitOpError() << operand << " head_dim " << type.getDimSize(2)
                             << " differs from the cache's " << cache.getHeadDim();
  }
  return mlir::success();
}

}  // namespace

LogicalResult WriteOp::verify() {
  CacheType cache = getCache().getType();
  if (failed(VerifyLayer(*this, cache, getLayerAttr().getInt()))) return mlir::failure();
  for (auto [name, value] : {std::pair<llvm::StringRef, mlir::Value>{"key", getKey()},
                             {"value", getValue()}}) {
    RankedTensorType type = TensorTypeOf(value);
    if (failed(VerifyHeads(*this, name, type, cache))) return mlir::failure();
    if (!DimsCompatible(type.getDimSize(1), cache.getKvHeads())) {
      return emitOpError() << name << " has " << type.getDimSize(1) << " heads but the cache has "
                           << cache.getKvHeads();
    }
  }
  if (!DimsCompatible(TensorTypeOf(getKey()).getDimSize(0),
                      TensorTypeOf(getSlotMapping()).getDimSize(0))) {
    return emitOpError() << "slot_mapping must have one entry per token";
  }
  return mlir::success();
}

LogicalResult AttentionOp::verify() {
  CacheType cache = getCache().getType();
  if (failed(VerifyLayer(*this, cache, getLayerAttr().getInt()))) return mlir::failure();
  RankedTensorType query = TensorTypeOf(getQuery());
  if (failed(VerifyHeads(*this, "query", query, cache))) return mlir::failure();
  int64_t heads = query.getDimSize(1);
  if (ShapedType::isDynamic(heads) || heads % cache.getKvHeads() != 0) {
    return emitOpError() << "query heads (" << heads << ") must be a multiple of the cache's "
                         << cache.getKvHeads() << " KV heads";
  }
  if (!DimsCompatible(query.getDimSize(0), TensorTypeOf(getPositions()).getDimSize(0))) {
    return emitOpError() << "positions must have one entry per query token";
  }
  if (mlir::IntegerAttr window = getWindowAttr(); window && window.getInt() <= 0) {
    return emitOpError() << "window must be positive, got " << window.getInt();
  }
  if (failed(VerifySoftcap(*this, getSoftcapAttr()))) return mlir::failure();
  if (TensorTypeOf(getResult()) != query) {
    return emitOpError() << "result type must equal the query's type " << query;
  }
  return mlir::success();
}

}  // namespace kvjit::kv

#define GET_OP_CLASSES
#include "ir/Kv/KvOps.cpp.inc"
