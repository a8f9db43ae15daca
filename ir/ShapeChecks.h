#ifndef KVJIT_IR_SHAPECHECKS_H_
#define KVJIT_IR_SHAPECHECKS_H_

#include "mlir/IR/BuiltinTypes.h"
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

}  // namespace kvjit::ir

#endif  // KVJIT_IR_SHAPECHECKS_H_
