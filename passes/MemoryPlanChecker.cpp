#include "passes/MemoryPlanChecker.h"

#include <algorithm>
#include <vector>

#include "ir/Tfm/TfmOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/MathExtras.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

namespace kvjit {

bool NeedsArenaSpace(mlir::Value value) {
  auto result = mlir::dyn_cast<mlir::OpResult>(value);
  if (!result || !mlir::isa<mlir::TensorType>(value.getType())) return false;
  mlir::Operation* producer = result.getOwner();
  return !mlir::isa<tfm::WeightOp, tfm::SliceColumnsOp>(producer) &&
         !producer->hasTrait<mlir::OpTrait::ConstantLike>();
}

kernel::ArenaAttr ArenaOf(mlir::func::FuncOp func) {
  return func->getAttrOfType<kernel::ArenaAttr>(kArenaAttrName);
}

mlir::DenseI64ArrayAttr ArenaOffsetsOf(mlir::Operation* op) {
  return op->getAttrOfType<mlir::DenseI64ArrayAttr>(kArenaOffsetsAttrName);
}

kv::LayoutAttr KvLayoutOf(mlir::func::FuncOp func) {
  return func->getAttrOfType<kv::LayoutAttr>(kKvLayoutAttrName);
}

mlir::Value ViewedValue(mlir::Value value) {
  while (auto view = value.getDefiningOp<tfm::SliceColumnsOp>()) value = view.getInput();
  return value;
}

std::optional<int64_t> BoundedTensorBytes(mlir::Type type, int64_t max_tokens) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isIntOrFloat()) return std::nullopt;
  // Sub-byte elements (i1) are stored one per byte, as kernels address them.
  std::optional<int64_t> bytes =
      static_cast<int64_t>((tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8);
  for (int64_t dim : tensor.getShape()) {
    bytes = llvm::checkedMul(*bytes, mlir::ShapedType::isDynamic(dim) ? max_tokens : dim);
    if (!bytes) return std::nullopt;
  }
  return bytes;
}

namespace {

// An activation as the plan placed it, with the live range the checker
// derived for it: op positions in the body, both ends included.
struct PlacedActivation {
  mlir::OpResult value;
  int64_t offset;
  int64_t bytes;
  int64_t defined_at;
  int64_t last_used_at;
};

// From the uses, not from the pass's forward walk, so that a liveness bug in
// the pass cannot hide itself.
int64_t LastUsePosition(mlir::OpResult value, mlir::Block& body,
                        const llvm::DenseMap<mlir::Operation*, int64_t>& positions) {
  int64_t last = positions.lookup(value.getOwner());
  for (mlir::OpOperand& use : value.getUses()) {
    mlir::Operation* user_in_body = body.findAncestorOpInBlock(*use.getOwner());
    last = std::max(last, positions.lookup(user_in_body));
    if (auto view = mlir::dyn_cast<tfm::SliceColumnsOp>(use.getOwner())) {
      last = std::max(last, LastUsePosition(view->getResult(0), body, positions));
    }
  }
  return last;
}

}  // namespace

mlir::LogicalResult VerifyMemoryPlan(mlir::func::FuncOp func) {
  if (func.isDeclaration()) return mlir::success();
  if (!func.getBody().hasOneBlock()) {
    return func.emitError() << "function @" << func.getSymName()
                            << " has more than one block; a memory plan covers one";
  }
  kernel::ArenaAttr arena = ArenaOf(func);
  if (!arena) {
    return func.emitError() << "function @" << func.getSymName() << " has no '" << kArenaAttrName
                            << "' attribute; run plan-memory first";
  }
  const int64_t arena_bytes = arena.getBytes();
  const int64_t max_tokens = arena.getMaxTokens();
  const int64_t alignment = arena.getAlignment();
  if (alignment <= 0 || !llvm::isPowerOf2_64(alignment)) {
    return func.emitError() << "plan alignment " << alignment << " is not a power of two";
  }

  mlir::Block& body = func.front();
  llvm::DenseMap<mlir::Operation*, int64_t> positions;
  for (auto [position, op] : llvm::enumerate(body)) positions[&op] = position;

  std::vector<PlacedActivation> placed;
  for (mlir::Operation& op : body) {
    if (op.getNumResults() == 0) continue;
    mlir::DenseI64ArrayAttr offsets = ArenaOffsetsOf(&op);
    if (!offsets) return op.emitError() << "has results but no '" << kArenaOffsetsAttrName << "'";
    if (offsets.size() != static_cast<int64_t>(op.getNumResults())) {
      return op.emitError() << "has " << op.getNumResults() << " results but "
                            << offsets.size() << " plan offsets";
    }
    for (mlir::OpResult result : op.getResults()) {
      const unsigned index = result.getResultNumber();
      const int64_t offset = offsets[index];
      if (!NeedsArenaSpace(result)) {
        if (offset != kNotInArena) {
          return op.emitError() << "result #" << index << " is not an activation but has arena offset "
                                << offset;
        }
        continue;
      }
      std::optional<int64_t> bytes = BoundedTensorBytes(result.getType(), max_tokens);
      if (!bytes) {
        return op.emitError() << "result #" << index << " of type " << result.getType()
                              << " has no bounded byte size";
      }
      if (offset < 0 || offset % alignment != 0) {
        return op.emitError() << "result #" << index << " has offset " << offset
                              << ", not a non-negative multiple of " << alignment;
      }
      if (offset > arena_bytes - *bytes) {
        return op.emitError() << "result #" << index << " at bytes [" << offset << ", "
                              << offset + *bytes << ") does not fit in the arena of "
                              << arena_bytes << " bytes";
      }
      placed.push_back({result, offset, *bytes, positions.lookup(&op),
                        LastUsePosition(result, body, positions)});
    }
  }

  // Sorted by offset, each activation can only collide with the ones that
  // start before it ends, so the scan stops early on a well-packed arena.
  std::sort(placed.begin(), placed.end(),
            [](const PlacedActivation& a, const PlacedActivation& b) {
              return a.offset < b.offset;
            });
  for (size_t i = 0; i < placed.size(); ++i) {
    const PlacedActivation& low = placed[i];
    for (size_t j = i + 1; j < placed.size() && placed[j].offset < low.offset + low.bytes; ++j) {
      const PlacedActivation& high = placed[j];
      if (high.bytes == 0) continue;
      const bool live_together =
          low.defined_at <= high.last_used_at && high.defined_at <= low.last_used_at;
      if (!live_together) continue;
      const PlacedActivation& later = low.defined_at < high.defined_at ? high : low;
      const PlacedActivation& earlier = &later == &low ? high : low;
      mlir::InFlightDiagnostic error =
          later.value.getOwner()->emitError()
          << "result #" << later.value.getResultNumber() << " at arena bytes [" << later.offset
          << ", " << later.offset + later.bytes << "), live over ops " << later.defined_at
          << ".." << later.last_used_at << ", overlaps a value at bytes [" << earlier.offset
          << ", " << earlier.offset + earlier.bytes << "), live over ops " << earlier.defined_at
          << ".." << earlier.last_used_at;
      error.attachNote(earlier.value.getOwner()->getLoc())
          << "the overlapped value is result #" << earlier.value.getResultNumber()
          << " of this op";
      return error;
    }
  }
  return mlir::success();
}

}  // namespace kvjit
