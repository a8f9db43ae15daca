#include "ir/Tfm/TfmOps.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "ir/ShapeChecks.h"
#include "ir/Tfm/TfmStorage.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

namespace kvjit::tfm {
namespace {

using ::kvjit::ir::DimsCompatible;
using ::kvjit::ir::TensorTypeOf;
using ::kvjit::ir::VerifySoftcap;

using mlir::LogicalResult;
using mlir::RankedTensorType;
using mlir::ShapedType;

std::string DimToString(int64_t dim) {
  return ShapedType::isDynamic(dim) ? std::string("?") : std::to_string(dim);
}

LogicalResult VerifyRank(mlir::Operation* op, llvm::StringRef operand, RankedTensorType type,
                         int64_t rank) {
  if (type.getRank() == rank) return mlir::success();
  return op->emitOpError() << operand << " must have rank " << rank << ", got " << type;
}

// Checks `actual` against the dimensions the op's semantics imply.
LogicalResult VerifyResultShape(mlir::Operation* op, RankedTensorType actual,
                                llvm::ArrayRef<int64_t> expected) {
  bool compatible = actual.getRank() == static_cast<int64_t>(expected.size());
  for (size_t i = 0; compatible && i < expected.size(); ++i) {
    compatible = DimsCompatible(actual.getDimSize(i), expected[i]);
  }
  if (compatible) return mlir::success();
  std::string shape;
  for (size_t i = 0; i < expected.size(); ++i) {
    shape += (i ? "x" : "") + DimToString(expected[i]);
  }
  return op->emitOpError() << "result type " << actual << " does not match the expected shape ["
                           << shape << "]";
}

LogicalResult VerifyFeatureVector(mlir::Operation* op, llvm::StringRef operand, mlir::Value vector,
                                  int64_t features) {
  int64_t size = TensorTypeOf(vector).getDimSize(0);
  if (DimsCompatible(size, features)) return mlir::success();
  return op->emitOpError() << operand << " operand has " << size << " elements but the input has "
                           << features << " features";
}

// A shifted param's source: a model weight of its shape.
LogicalResult VerifyShiftedSource(ParamOp param, mlir::SymbolTableCollection& symbols) {
  mlir::FlatSymbolRefAttr name = param.getShiftedAttr();
  auto source = symbols.lookupNearestSymbolFrom<ParamOp>(param, name);
  if (!source) return param.emitOpError() << "shifts " << name << ", which is no tfm.param";
  if (!source.isModelWeight()) {
    return param.emitOpError() << "shifts " << name
                               << ", which the compiler makes: the source must be a model weight";
  }
  if (source.getType() != param.getType()) {
    return param.emitOpError() << "shifts " << name << " of type " << source.getType() << " into "
                               << param.getType() << "; the shapes must match";
  }
  return mlir::success();
}

// A slice's source: a model weight, of the same storage and rank, whose
// extent on the axis holds the slice and on the other axis equals it.
LogicalResult VerifySliceSource(ParamOp param, mlir::SymbolTableCollection& symbols) {
  mlir::FlatSymbolRefAttr name = param.getSlicedAttr();
  auto source = symbols.lookupNearestSymbolFrom<ParamOp>(param, name);
  if (!source) return param.emitOpError() << "slices " << name << ", which is no tfm.param";
  if (!source.isModelWeight()) {
    return param.emitOpError() << "slices " << name
                               << ", which the compiler makes: the source must be a model weight";
  }
  auto type = mlir::cast<RankedTensorType>(param.getType());
  auto source_type = mlir::cast<RankedTensorType>(source.getType());
  const int64_t axis = *param.getSliceAxis();
  const int64_t from = *param.getSliceFrom();
  // Columns that split a block are dequantized (f32).
  const bool storage_fits = source.getStorage() == param.getStorage() ||
                            (param.getStorage() == StorageType::f32 && axis == type.getRank() - 1);
  bool fits = storage_fits && source_type.getRank() == type.getRank();
  for (int64_t d = 0; fits && d < type.getRank(); ++d) {
    fits = d == axis ? from + type.getDimSize(d) <= source_type.getDimSize(d)
                     : type.getDimSize(d) == source_type.getDimSize(d);
  }
  if (!fits) {
    return param.emitOpError() << "slices " << type << " storage "
                               << stringifyStorageType(param.getStorage()) << " from index " << from
                               << " of axis " << axis << " of " << name << " (" << source_type
                               << " storage " << stringifyStorageType(source.getStorage())
                               << "), which does not hold it";
  }
  return mlir::success();
}

}  // namespace

LogicalResult ParamOp::verify() {
  auto type = mlir::cast<RankedTensorType>(getType());
  if (!type.hasStaticShape()) {
    return emitOpError() << "weight @" << getSymName() << " must have a static shape, got " << type;
  }
  if (static_cast<bool>(getShifted()) != static_cast<bool>(getShift())) {
    return emitOpError() << "weight @" << getSymName() << " needs both 'shifted' and 'shift' or "
                         << "neither";
  }
  if (getShifted()) {
    if (getConcat()) {
      return emitOpError() << "weight @" << getSymName() << " is either shifted or a "
                           << "concatenation, not both";
    }
    if (getStorage() != StorageType::f32) {
      return emitOpError() << "weight @" << getSymName() << " is shifted in f32, so its storage "
                           << "must be f32, got " << stringifyStorageType(getStorage());
    }
    if (!std::isfinite(getShiftAttr().getValueAsDouble())) {
      return emitOpError() << "weight @" << getSymName() << " needs a finite shift";
    }
  }
  int64_t block = quant::ElementsPerBlock(ToQuantStorage(getStorage()));
  if (getSliced()) {
    if (getConcat() || getShifted()) {
      return emitOpError() << "weight @" << getSymName()
                           << " is a slice, so it is neither shifted nor a concatenation";
    }
    if (!getSliceAxis() || !getSliceFrom()) {
      return emitOpError() << "weight @" << getSymName() << " needs the slice's axis and start";
    }
    const int64_t axis = *getSliceAxis();
    if (axis < 0 || axis >= std::max<int64_t>(type.getRank(), 1) || axis > 1) {
      return emitOpError() << "weight @" << getSymName() << " slices axis " << axis
                           << "; a slice is of rows (axis 0) or of a matrix's columns (axis 1)";
    }
    const int64_t from = *getSliceFrom();
    if (from < 0 || (axis == type.getRank() - 1 && from % block != 0)) {
      return emitOpError() << "weight @" << getSymName() << " slices from index " << from
                           << ", which is not a block boundary of "
                           << stringifyStorageType(getStorage()) << " (blocks of " << block
                           << " elements)";
    }
  } else if (getSliceAxis() || getSliceFrom()) {
    return emitOpError() << "weight @" << getSymName() << " has a slice's axis or start without "
                         << "'sliced'";
  }
  int64_t row = type.getRank() == 0 ? 1 : type.getShape().back();
  if (row % block != 0) {
    return emitOpError() << "weight @" << getSymName() << " stored as "
                         << stringifyStorageType(getStorage()) << " needs rows of a multiple of "
                         << block << " elements, got " << row;
  }
  if (getLayout() == WeightLayout::rows_interleaved8) {
    // The kernels read interleaved blocks of 32 elements, eight rows at a time.
    if (block != 32) {
      return emitOpError() << "weight @" << getSymName() << " in layout rows_interleaved8 must be "
                           << "stored in 32-element blocks (q8_0, q4_0, q4_1, q5_0, q5_1), got "
                           << stringifyStorageType(getStorage());
    }
    if (type.getRank() != 2 || type.getDimSize(0) % 8 != 0) {
      return emitOpError() << "weight @" << getSymName() << " in layout rows_interleaved8 must be "
                           << "a matrix of a multiple of 8 rows, got " << type;
    }
  }
  return mlir::success();
}

LogicalResult ParamOp::verifySymbolUses(mlir::SymbolTableCollection& symbols) {
  if (getShifted()) return VerifyShiftedSource(*this, symbols);
  if (getSliced()) return VerifySliceSource(*this, symbols);
  if (!getConcat()) return mlir::success();
  auto type = mlir::cast<RankedTensorType>(getType());
  if (type.getRank() != 2) {
    return emitOpError() << "weight @" << getSymName() << " concatenates rows, so it must be a "
                         << "matrix, got " << type;
  }
  int64_t rows = 0;
  for (mlir::FlatSymbolRefAttr name : getConcat()->getAsRange<mlir::FlatSymbolRefAttr>()) {
    auto part = symbols.lookupNearestSymbolFrom<ParamOp>(*this, name);
    if (!part) return emitOpError() << "concatenates " << name << ", which is no tfm.param";
    if (part.getConcat()) {
      return emitOpError() << "concatenates " << name << ", itself a concatenation";
    }
    auto part_type = mlir::cast<RankedTensorType>(part.getType());
    if (part.getStorage() != getStorage() || part_type.getRank() != 2 ||
        part_type.getDimSize(1) != type.getDimSize(1)) {
      return emitOpError() << "concatenates " << name << " (" << part_type << " storage "
                           << stringifyStorageType(part.getStorage()) << ") into rows of "
                           << type.getDimSize(1) << " stored as "
                           << stringifyStorageType(getStorage());
    }
    rows += part_type.getDimSize(0);
  }
  if (rows != type.getDimSize(0)) {
    return emitOpError() << "has " << type.getDimSize(0) << " rows but its parts have " << rows;
  }
  return mlir::success();
}

LogicalResult WeightOp::verifySymbolUses(mlir::SymbolTableCollection& symbols) {
  auto param = symbols.lookupNearestSymbolFrom<ParamOp>(*this, getParamAttr());
  if (!param) return emitOpError() << "refers to " << getParamAttr() << ", which is no tfm.param";
  if (param.getType() != getResult().getType()) {
    return emitOpError() << "result type " << getResult().getType() << " differs from "
                         << getParamAttr() << "'s declared type " << param.getType();
  }
  return mlir::success();
}

LogicalResult EmbeddingOp::verify() {
  RankedTensorType table = TensorTypeOf(getTable());
  if (failed(VerifyRank(*this, "table", table, 2))) return mlir::failure();
  int64_t tokens = TensorTypeOf(getTokens()).getDimSize(0);
  return VerifyResultShape(*this, TensorTypeOf(getResult()), {tokens, table.getDimSize(1)});
}

LogicalResult LinearOp::verify() {
  RankedTensorType input = TensorTypeOf(getInput());
  RankedTensorType weight = TensorTypeOf(getWeight());
  if (failed(VerifyRank(*this, "input", input, 2)) ||
      failed(VerifyRank(*this, "weight", weight, 2))) {
    return mlir::failure();
  }
  if (!DimsCompatible(weight.getDimSize(1), input.getDimSize(1))) {
    return emitOpError() << "weight operand has " << weight.getDimSize(1)
                         << " input features but the input operand has " << input.getDimSize(1);
  }
  if (getBias()) {
    int64_t bias = TensorTypeOf(getBias()).getDimSize(0);
    if (!DimsCompatible(bias, weight.getDimSize(0))) {
      return emitOpError() << "bias operand has " << bias << " elements but the weight has "
                           << weight.getDimSize(0) << " output features";
    }
  }
  return VerifyResultShape(*this, TensorTypeOf(getResult()),
                           {input.getDimSize(0), weight.getDimSize(0)});
}

LogicalResult RmsNormOp::verify() {
  RankedTensorType input = TensorTypeOf(getInput());
  if (input.getRank() < 1) return emitOpError() << "input must have rank at least 1";
  if (!(getEpsilon().convertToFloat() >= 0)) return emitOpError() << "epsilon must be >= 0";
  return VerifyFeatureVector(*this, "weight", getWeight(), input.getShape().back());
}

LogicalResult LayerNormOp::verify() {
  RankedTensorType input = TensorTypeOf(getInput());
  if (input.getRank() < 1) return emitOpError() << "input must have rank at least 1";
  if (!(getEpsilon().convertToFloat() >= 0)) return emitOpError() << "epsilon must be >= 0";
  int64_t features = input.getShape().back();
  if (failed(VerifyFeatureVector(*this, "weight", getWeight(), features))) return mlir::failure();
  if (getBias()) return VerifyFeatureVector(*this, "bias", getBias(), features);
  return mlir::success();
}

LogicalResult RopeOp::verify() {
  RankedTensorType input = TensorTypeOf(getInput());
  if (failed(VerifyRank(*this, "input", input, 3))) return mlir::failure();
  int64_t positions = TensorTypeOf(getPositions()).getDimSize(0);
  if (!DimsCompatible(positions, input.getDimSize(0))) {
    return emitOpError() << "positions operand has " << positions << " entries but the input has "
                         << input.getDimSize(0) << " tokens";
  }
  int64_t head_dim = input.getDimSize(2);
  if (ShapedType::isDynamic(head_dim)) return emitOpError() << "head dimension must be static";
  int64_t rotary_dim = getRotaryDimAttr() ? getRotaryDimAttr().getInt() : head_dim;
  if (rotary_dim <= 0 || rotary_dim > head_dim || rotary_dim % 2 != 0) {
    return emitOpError() << "rotary_dim must be even and in (0, " << head_dim << "], got "
                         << rotary_dim;
  }
  if (!(getTheta().convertToFloat() > 0)) return emitOpError() << "theta must be positive";
  if (std::optional<llvm::ArrayRef<float>> factors = getFreqFactors()) {
    if (getScalingAttr()) return emitOpError() << "takes freq_factors or scaling, not both";
    if (static_cast<int64_t>(factors->size()) != rotary_dim / 2) {
      return emitOpError() << "freq_factors has " << factors->size() << " entries but rotary_dim "
                           << rotary_dim << " has " << rotary_dim / 2 << " pairs";
    }
    for (float factor : *factors) {
      if (!(factor > 0) || std::isinf(factor)) {
        return emitOpError() << "freq_factors must be positive and finite, got " << factor;
      }
    }
  }
  return mlir::success();
}

LogicalResult MatmulOp::verify() {
  RankedTensorType lhs = TensorTypeOf(getLhs());
  RankedTensorType rhs = TensorTypeOf(getRhs());
  int64_t rank = lhs.getRank();
  if (rank < 2 || rhs.getRank() != rank) {
    return emitOpError() << "operands must have one rank of at least 2, got " << lhs << " and "
                         << rhs;
  }
  llvm::SmallVector<int64_t> expected;
  for (int64_t i = 0; i < rank - 2; ++i) {
    if (!DimsCompatible(lhs.getDimSize(i), rhs.getDimSize(i))) {
      return emitOpError() << "batch dimension " << i << " differs: " << lhs.getDimSize(i)
                           << " vs " << rhs.getDimSize(i);
    }
    expected.push_back(ShapedType::isDynamic(lhs.getDimSize(i)) ? rhs.getDimSize(i)
                                                                 : lhs.getDimSize(i));
  }
  if (!DimsCompatible(lhs.getDimSize(rank - 1), rhs.getDimSize(rank - 2))) {
    return emitOpError() << "contracted dimensions differ: lhs has " << lhs.getDimSize(rank - 1)
                         << " columns, rhs has " << rhs.getDimSize(rank - 2) << " rows";
  }
  expected.push_back(lhs.getDimSize(rank - 2));
  expected.push_back(rhs.getDimSize(rank - 1));
  return VerifyResultShape(*this, TensorTypeOf(getResult()), expected);
}

LogicalResult TransposeOp::verify() {
  RankedTensorType input = TensorTypeOf(getInput());
  llvm::ArrayRef<int64_t> permutation = getPermutation();
  if (static_cast<int64_t>(permutation.size()) != input.getRank()) {
    return emitOpError() << "permutation has " << permutation.size()
                         << " entries but the input has rank " << input.getRank();
  }
  llvm::SmallVector<bool> seen(permutation.size(), false);
  llvm::SmallVector<int64_t> expected;
  for (int64_t dim : permutation) {
    if (dim < 0 || dim >= input.getRank() || seen[dim]) {
      return emitOpError() << "permutation is not a permutation of [0, " << input.getRank() << ")";
    }
    seen[dim] = true;
    expected.push_back(input.getDimSize(dim));
  }
  return VerifyResultShape(*this, TensorTypeOf(getResult()), expected);
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = TensorTypeOf(getInput());
  RankedTensorType result = TensorTypeOf(getResult());
  auto static_product = [](RankedTensorType type) {
    int64_t product = 1;
    for (int64_t dim : type.getShape()) {
      if (!ShapedType::isDynamic(dim)) product *= dim;
    }
    return product;
  };
  if (input.getNumDynamicDims() > 1 || input.getNumDynamicDims() != result.getNumDynamicDims()) {
    return emitOpError() << "input and result must have the same single dynamic dimension or none, "
                         << "got " << input << " and " << result;
  }
  if (static_product(input) != static_product(result)) {
    return emitOpError() << "changes the element count: " << input << " cannot become " << result;
  }
  return mlir::success();
}

LogicalResult SliceColumnsOp::verify() {
  RankedTensorType input = TensorTypeOf(getInput());
  if (failed(VerifyRank(*this, "input", input, 2))) return mlir::failure();
  const int64_t features = input.getDimSize(1);
  const int64_t offset = getOffset();
  const int64_t size = getSize();
  if (ShapedType::isDynamic(features) || offset < 0 || size < 1 || offset + size > features) {
    return emitOpError() << "columns [" << offset << ", " << offset + size
                         << ") are not within the input's " << DimToString(features)
                         << " features";
  }
  return VerifyResultShape(*this, TensorTypeOf(getResult()), {input.getDimSize(0), size});
}

LogicalResult GatherRowsOp::verify() {
  RankedTensorType input = TensorTypeOf(getInput());
  if (failed(VerifyRank(*this, "input", input, 2))) return mlir::failure();
  return VerifyResultShape(*this, TensorTypeOf(getResult()),
                           {TensorTypeOf(getRows()).getDimSize(0), input.getDimSize(1)});
}

LogicalResult RepeatOp::verify() {
  RankedTensorType input = TensorTypeOf(getInput());
  int64_t axis = getAxisAttr().getInt();
  int64_t repeats = getRepeatsAttr().getInt();
  if (axis < 0 || axis >= input.getRank()) {
    return emitOpError() << "axis " << axis << " is out of range for rank " << input.getRank();
  }
  if (repeats < 1) return emitOpError() << "repeats must be at least 1, got " << repeats;
  llvm::SmallVector<int64_t> expected(input.getShape());
  if (!ShapedType::isDynamic(expected[axis])) expected[axis] *= repeats;
  return VerifyResultShape(*this, TensorTypeOf(getResult()), expected);
}

LogicalResult AttentionOp::verify() {
  RankedTensorType query = TensorTypeOf(getQuery());
  RankedTensorType key = TensorTypeOf(getKey());
  RankedTensorType value = TensorTypeOf(getValue());
  if (failed(VerifyRank(*this, "query", query, 3)) || failed(VerifyRank(*this, "key", key, 3)) ||
      failed(VerifyRank(*this, "value", value, 3))) {
    return mlir::failure();
  }
  if (key != value) {
    return emitOpError() << "key and value must have one type, got " << key << " and " << value;
  }
  int64_t heads = query.getDimSize(1);
  int64_t kv_heads = key.getDimSize(1);
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(kv_heads) || heads % kv_heads != 0) {
    return emitOpError() << "query heads (" << heads << ") must be a static multiple of key heads ("
                         << kv_heads << ")";
  }
  if (!DimsCompatible(query.getDimSize(2), key.getDimSize(2))) {
    return emitOpError() << "query head_dim " << query.getDimSize(2) << " differs from key head_dim "
                         << key.getDimSize(2);
  }
  if (mlir::IntegerAttr window = getWindowAttr()) {
    if (window.getInt() <= 0) {
      return emitOpError() << "window must be positive, got " << window.getInt();
    }
    if (!getCausal()) return emitOpError() << "has a window but is not causal";
  }
  if (failed(VerifySoftcap(*this, getSoftcapAttr()))) return mlir::failure();
  return VerifyResultShape(*this, TensorTypeOf(getResult()),
                           {query.getDimSize(0), heads, query.getDimSize(2)});
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = TensorTypeOf(getInput()).getRank();
  int64_t axis = getAxisAttr().getInt();
  if (axis < -rank || axis >= rank) {
    return emitOpError() << "axis " << axis << " is out of range for rank " << rank;
  }
  return mlir::success();
}

LogicalResult CausalMaskOp::verify() {
  if (TensorTypeOf(getInput()).getRank() < 2) {
    return emitOpError() << "input must be [..., queries, keys], got " << getInput().getType();
  }
  if (mlir::IntegerAttr window = getWindowAttr(); window && window.getInt() <= 0) {
    return emitOpError() << "window must be positive, got " << window.getInt();
  }
  return mlir::success();
}

}  // namespace kvjit::tfm

#define GET_OP_CLASSES
#include "ir/Tfm/TfmOps.cpp.inc"
