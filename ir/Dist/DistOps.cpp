#include "ir/Dist/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

namespace kvjit::dist {

mlir::LogicalResult AllGatherOp::verify() {
  auto input = mlir::cast<mlir::RankedTensorType>(getInput().getType());
  auto result = mlir::cast<mlir::RankedTensorType>(getResult().getType());
  if (input.getRank() != 2 || result.getRank() != 2) {
    return emitOpError() << "gathers the columns of [rows, columns] tensors, got " << input
                         << " into " << result;
  }
  llvm::ArrayRef<int64_t> columns = getRankColumns();
  const int64_t rank = getRank();
  if (rank < 0 || rank >= static_cast<int64_t>(columns.size())) {
    return emitOpError() << "is rank " << rank << " of " << columns.size() << " ranks";
  }
  int64_t total = 0;
  for (int64_t rank_columns : columns) {
    if (rank_columns <= 0) return emitOpError() << "needs a positive column count for every rank";
    total += rank_columns;
  }
  if (input.getDimSize(1) != columns[rank] || result.getDimSize(1) != total ||
      input.getDimSize(0) != result.getDimSize(0)) {
    return emitOpError() << "gathers " << input << " as rank " << rank << " of columns ["
                         << columns << "] into " << result << ", which does not fit";
  }
  return mlir::success();
}

}  // namespace kvjit::dist

#define GET_OP_CLASSES
#include "ir/Dist/DistOps.cpp.inc"
