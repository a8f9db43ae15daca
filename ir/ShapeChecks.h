#ifndef KVJIT_IR_SHAPECHECKS_H_
#define KVJIT_IR_SHAPECHECKS_H_

#include <cmath>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

// Helpers the verifiers of every kvjit dialect share.
namespace kvjit::ir {

// Two dimensions can describe one tensor: equal, or either unknown.
inline bool DimsCompatible(int64_t a, int64_t b) {
  return a == b || mlir::ShapedType::isDynamic(a) || mlir::ShapedType::isDynamic(b);
}

// The type of a value ODS already constrained to a ranked tensor.
inline mlir::RankedTensorType TensorTypeOf(mlir::Value value) {
  return mlir::cast<mlir::RankedTensorType>(value.getType());
}

// An attention's optional soft-capping of its scores, cap · tanh(s / cap):
// absent, or positive and finite.
inline mlir::LogicalResult VerifySoftcap(mlir::Operation* op, mlir::FloatAttr softcap) {
  if (!softcap) return mlir::success();
  const double cap = softcap.getValueAsDouble();
  if (cap > 0 && std::isfinite(cap)) return mlir::success();
  return op->emitOpError() << "softcap must be positive and finite, got " << cap;
}

}  // namespace kvjit::ir

#endif  // KVJIT_IR_SHAPECHECKS_H_
